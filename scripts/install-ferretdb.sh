#!/usr/bin/env bash
# Installs FerretDB 1.24.2 (the MongoDB wire protocol server the integration
# tests run against) into $GOBIN, default ~/go/bin.
#
# Why not a bare `go install github.com/FerretDB/FerretDB/cmd/ferretdb@v1.24.2`:
# the module as published lacks build/version/version.txt (the release process
# generates it), so that binary panics at start; and the module proxy may refuse
# the version list that `go install pkg@version` asks for. So we build the same
# tagged module from a throwaway main module with the version file filled in.
set -euo pipefail

version=v1.24.2
gobin=${GOBIN:-$(go env GOPATH)/bin}
target="$gobin/ferretdb"

# Output is captured before it is matched: under pipefail, `grep -q` or `head`
# closing the pipe early would fail the script with SIGPIPE (exit 141).
installed_version() { "$target" --version 2>/dev/null || true; }

if [ -x "$target" ] && [[ "$(installed_version)" == *"version: $version"* ]]; then
  echo "ferretdb $version already at $target"
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
cat > go.mod <<MOD
module ferretdb-build

go 1.22

require github.com/FerretDB/FerretDB $version
MOD
cat > tools.go <<'SRC'
//go:build tools

package tools

import _ "github.com/FerretDB/FerretDB/cmd/ferretdb"
SRC

echo "fetching FerretDB $version modules..."
go mod download github.com/FerretDB/FerretDB
modsrc=$(go list -m -f '{{.Dir}}' github.com/FerretDB/FerretDB)
cp -r "$modsrc" src
chmod -R u+w src
echo "$version" > src/build/version/version.txt
go mod edit -replace "github.com/FerretDB/FerretDB=./src"
go mod tidy
mkdir -p "$gobin"
echo "building ferretdb..."
go build -trimpath -o "$target" github.com/FerretDB/FerretDB/cmd/ferretdb
built=$(installed_version)
if [[ "$built" != *"version: $version"* ]]; then
  echo "the ferretdb built at $target does not report $version" >&2
  exit 1
fi
echo "ferretdb $version installed at $target"
