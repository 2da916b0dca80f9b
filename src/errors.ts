/**
 * The one error registry: every error code the API can answer, with its HTTP
 * status and whether a caller may retry. Handlers throw `AppError`; the HTTP
 * edge turns anything else into a logged 500 through `toHttpError`.
 */
export const errorCodes = {
  validation_error: { status: 400, retryable: false },
  /** The request itself is malformed or ambiguous (framing, an id header): answered before any handler runs. */
  bad_request: { status: 400, retryable: false },
  unauthorized: { status: 401, retryable: false },
  forbidden: { status: 403, retryable: false },
  not_found: { status: 404, retryable: false },
  method_not_allowed: { status: 405, retryable: false },
  conflict: { status: 409, retryable: false },
  payload_too_large: { status: 413, retryable: false },
  unsupported_media_type: { status: 415, retryable: false },
  idempotency_mismatch: { status: 422, retryable: false },
  header_fields_too_large: { status: 431, retryable: false },
  rate_limited: { status: 429, retryable: true },
  internal_error: { status: 500, retryable: true },
  service_unavailable: { status: 503, retryable: true },
} as const;

export type ErrorCode = keyof typeof errorCodes;

export interface ErrorDetail {
  /** A JSON Pointer (RFC 6901) into the input that was checked: the JSON body, the query parameters, the path parameters or the headers; '' is the whole body. */
  path: string;
  message: string;
}

export interface ErrorBody {
  error: ErrorCode;
  message: string;
  statusCode: number;
  details?: ErrorDetail[];
}

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly statusCode: number;
  readonly details: ErrorDetail[] | undefined;
  /** Seconds a client should wait (429, 503). */
  readonly retryAfterSeconds: number | undefined;

  constructor(code: ErrorCode, message: string, opts: { details?: ErrorDetail[]; retryAfterSeconds?: number; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'AppError';
    this.code = code;
    this.statusCode = errorCodes[code].status;
    this.details = opts.details;
    this.retryAfterSeconds = opts.retryAfterSeconds;
  }

  get retryable(): boolean {
    return errorCodes[this.code].retryable;
  }

  toBody(): ErrorBody {
    const body: ErrorBody = { error: this.code, message: this.message, statusCode: this.statusCode };
    if (this.details && this.details.length > 0) body.details = this.details;
    return body;
  }
}

export const notFound = (what = 'resource'): AppError => new AppError('not_found', `${what} not found`);

/**
 * A JSON Pointer (RFC 6901): how a validation error's `details` name the
 * value at fault, e.g. `pointer('messages', 17, 'to')` is `/messages/17/to`.
 * `~` and `/` inside a segment are escaped, so a key that holds a dot or a
 * slash is still named without ambiguity; no segments point at the whole input.
 */
export function pointer(...segments: Array<string | number>): string {
  return segments.map((s) => `/${String(s).replace(/~/g, '~0').replace(/\//g, '~1')}`).join('');
}

/** A 400 about one value, named by its JSON Pointer (`pointer(...)`). */
export function validationError(path: string, message: string): AppError {
  return new AppError('validation_error', violationText({ path, message }), { details: [{ path, message }] });
}

/** One violation as a sentence: its pointer, then what is wrong. */
export function violationText(d: ErrorDetail): string {
  return d.path ? `${d.path}: ${d.message}` : d.message;
}

/** What the client sees for any thrown value: an AppError as it is, anything else a bare 500. */
export function toHttpError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  return new AppError('internal_error', 'internal error', { cause: err });
}

/**
 * How an actor handler says a failure will never succeed: the message goes
 * to the dead letters at its first failure, with this message as the reason.
 */
export class TerminalError extends Error {
  constructor(message: string, opts: { cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'TerminalError';
  }
}

/** A failure worth another delivery, no sooner than `retryAfterMs` when given. */
export class RetryableError extends Error {
  readonly retryAfterMs: number | undefined;

  constructor(message: string, opts: { retryAfterMs?: number; cause?: unknown } = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'RetryableError';
    this.retryAfterMs = opts.retryAfterMs;
  }
}

export type FailurePolicy = { retry: false } | { retry: true; afterMs: number | undefined };

/**
 * Whether a failed actor delivery is tried again, decided once from the
 * error: TerminalError never, RetryableError after its delay, an AppError by
 * its registry entry (retryAfterSeconds as its delay), anything else (a bug,
 * a lost connection) is retried up to the runtime's delivery limit.
 */
export function failurePolicy(err: unknown): FailurePolicy {
  if (err instanceof TerminalError) return { retry: false };
  if (err instanceof RetryableError) return { retry: true, afterMs: err.retryAfterMs };
  if (err instanceof AppError) {
    if (!err.retryable) return { retry: false };
    return { retry: true, afterMs: err.retryAfterSeconds === undefined ? undefined : err.retryAfterSeconds * 1000 };
  }
  return { retry: true, afterMs: undefined };
}
