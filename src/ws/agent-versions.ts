/**
 * What an agent of a given `hello.agentVersion` understands: the gateway
 * leaves out of its frames what an older agent would refuse (frames are
 * strict), and does not ask it what it cannot answer.
 */

/** The first agent version that accepts `send.traceparent` (0.2). */
export const traceparentSince = { major: 0, minor: 2 } as const;

/** Whether an agent of this `hello.agentVersion` accepts `send.traceparent`; one whose version does not start with `major.minor` does not. */
export function acceptsTraceparent(agentVersion: string): boolean {
  return versionAtLeast(agentVersion, traceparentSince);
}

/** The first agent version that answers `lookup` (0.3). */
export const lookupSince = { major: 0, minor: 3 } as const;

/** Whether an agent of this `hello.agentVersion` answers `lookup`. */
export function answersLookup(agentVersion: string): boolean {
  return versionAtLeast(agentVersion, lookupSince);
}

/** The first agent version that answers `checkSent`, the failover check (0.4). */
export const checkSentSince = { major: 0, minor: 4 } as const;

/** Whether an agent of this `hello.agentVersion` answers `checkSent`. */
export function answersCheckSent(agentVersion: string): boolean {
  return versionAtLeast(agentVersion, checkSentSince);
}

function versionAtLeast(agentVersion: string, since: { major: number; minor: number }): boolean {
  const m = /^(\d+)\.(\d+)/.exec(agentVersion);
  if (!m) return false;
  const major = Number(m[1]);
  const minor = Number(m[2]);
  return major > since.major || (major === since.major && minor >= since.minor);
}
