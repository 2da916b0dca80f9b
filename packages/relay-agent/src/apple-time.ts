/**
 * Messages stores times as an offset from the Apple epoch, 2001-01-01T00:00:00Z.
 * Since macOS 10.13 the unit is nanoseconds; older rows (and some columns) still
 * hold seconds. A nanosecond value for any date after 2001-01-01 00:01:40 is at
 * least 1e11, while a seconds value stays below 1e11 until the year 5170.
 */
export const appleEpochMs = Date.UTC(2001, 0, 1);

const secondsBelow = 1e11;

/** An Apple timestamp as epoch milliseconds, or undefined for "not set" (NULL or 0). */
export function appleTimeToMs(value: number | bigint | null | undefined): number | undefined {
  if (value === null || value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) return undefined;
  return appleEpochMs + (n < secondsBelow ? n * 1000 : Math.round(n / 1e6));
}

/** An Apple timestamp as an ISO string, or undefined for "not set". */
export function appleTimeToIso(value: number | bigint | null | undefined): string | undefined {
  const ms = appleTimeToMs(value);
  return ms === undefined ? undefined : new Date(ms).toISOString();
}

/** Epoch milliseconds as Apple nanoseconds, exact (the value is past 2^53, so a bigint). */
export function msToAppleNs(ms: number): bigint {
  return BigInt(Math.round(ms - appleEpochMs)) * 1_000_000n;
}
