/**
 * The server's error codes a client may retry (the `retryable` ones of the
 * server's error registry, src/errors.ts; a test keeps the two equal). The
 * agent keeps its own copy so that it depends on nothing of the server.
 */
export const retryableServerErrors: ReadonlySet<string> = new Set([
  'rate_limited',
  'internal_error',
  'service_unavailable',
]);
