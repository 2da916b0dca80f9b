#!/usr/bin/env bash
# A local Redis Cluster for tests: 3 masters and 3 replicas on localhost.
#
#   scripts/redis-cluster.sh start [first-port] [state-dir]
#   scripts/redis-cluster.sh stop  [first-port] [state-dir]
#   scripts/redis-cluster.sh node  first-port "" port   (starts one node again, e.g. after a kill)
#
# Ports are first-port .. first-port+5 (default 7100); the cluster bus uses
# port+10000. `start` writes each node's PID and files under the state dir
# (default $TMPDIR/relaybox-redis-cluster-<first-port>) and returns once every
# node reports cluster_state:ok and each master has its replica, in sync. `stop` ends
# the nodes by the PIDs it wrote and removes the state dir. Nothing is
# persisted (no RDB, no AOF); cluster-node-timeout is 2 s, so a dead master's
# replica is promoted within a few seconds.
#
# `start` prints the seed list for REDIS_CLUSTER_NODES on its last line.
set -euo pipefail

action=${1:-}
first=${2:-7100}
dir=${3:-${TMPDIR:-/tmp}/relaybox-redis-cluster-$first}
ports=("$first" $((first + 1)) $((first + 2)) $((first + 3)) $((first + 4)) $((first + 5)))

answers() { # port
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

stop() {
  [ -d "$dir" ] || return 0
  local pid
  for port in "${ports[@]}"; do
    [ -f "$dir/$port.pid" ] || continue
    pid=$(cat "$dir/$port.pid")
    kill "$pid" 2>/dev/null || true
  done
  for port in "${ports[@]}"; do
    [ -f "$dir/$port.pid" ] || continue
    pid=$(cat "$dir/$port.pid")
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  rm -rf "$dir"
}

# One node, as `start` runs it: also what a test uses to bring a killed node back (it rejoins as a replica).
node() { # port
  local port=$1
  mkdir -p "$dir/$port"
  redis-server --port "$port" --bind 127.0.0.1 --cluster-enabled yes --cluster-config-file "$dir/$port/nodes.conf" \
    --cluster-node-timeout 2000 --save "" --appendonly no --dir "$dir/$port" --daemonize no \
    --logfile "$dir/$port/redis.log" >/dev/null 2>&1 &
  echo $! >"$dir/$port.pid"
  for _ in $(seq 100); do answers "$port" && return 0; sleep 0.1; done
  echo "redis node on port $port did not answer" >&2
  return 1
}

healthy() { # every node: cluster_state ok; every replica in sync with its master; three masters with one replica each
  local info replication online=0
  for port in "${ports[@]}"; do
    info=$(redis-cli -p "$port" cluster info 2>/dev/null) || return 1
    [[ "$info" == *"cluster_state:ok"* ]] || return 1
    replication=$(redis-cli -p "$port" info replication 2>/dev/null) || return 1
    if [[ "$replication" == *"role:slave"* ]]; then
      [[ "$replication" == *"master_link_status:up"* ]] || return 1
    else
      [[ "$replication" == *"state=online"* ]] && online=$((online + 1))
    fi
  done
  [ "$online" -eq 3 ]
}

start() {
  for port in "${ports[@]}"; do
    if answers "$port"; then echo "port $port is taken: stop what runs there or choose another first port" >&2; return 1; fi
    if answers $((port + 10000)); then echo "port $((port + 10000)) (cluster bus of $port) is taken" >&2; return 1; fi
  done
  rm -rf "$dir"
  mkdir -p "$dir"
  for port in "${ports[@]}"; do node "$port"; done
  local seeds=()
  for port in "${ports[@]}"; do seeds+=("127.0.0.1:$port"); done
  redis-cli --cluster create "${seeds[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1 || {
    cat "$dir/create.log" >&2
    stop
    return 1
  }
  local deadline=$((SECONDS + 60))
  until healthy; do
    if [ "$SECONDS" -ge "$deadline" ]; then echo "the cluster on $first.. did not become healthy within 60 s" >&2; stop; return 1; fi
    sleep 0.2
  done
  echo "redis cluster ok on ports ${ports[0]}-${ports[5]} (state in $dir)"
  (IFS=,; echo "${seeds[*]}")
}

case "$action" in
  start) start ;;
  stop) stop ;;
  node) node "${4:?port}" ;;
  *) echo "usage: $0 start|stop [first-port] [state-dir]" >&2; exit 2 ;;
esac
