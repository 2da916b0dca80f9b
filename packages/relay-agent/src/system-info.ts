import { execFile } from 'node:child_process';
import { hostname, release, type } from 'node:os';
import type { HelloFrame } from 'relaybox-relay-protocol/frames.ts';

/** What `hello.systemInfo` reports: "macOS 14.5" on a Mac, the kernel name and release elsewhere. */
export async function readSystemInfo(): Promise<HelloFrame['systemInfo']> {
  let hostOsVersion = `${type()} ${release()}`;
  if (process.platform === 'darwin') {
    const version = await new Promise<string | undefined>((done) => {
      execFile('/usr/bin/sw_vers', ['-productVersion'], { timeout: 5_000 }, (err, stdout) =>
        done(err ? undefined : stdout.trim()),
      );
    });
    if (version) hostOsVersion = `macOS ${version}`;
  }
  return { hostOsVersion: hostOsVersion.slice(0, 200), hostname: hostname().slice(0, 200) };
}
