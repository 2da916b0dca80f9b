/**
 * The one error registry: every error code the API can answer, with its HTTP
 * status, whether a caller may retry, its problem type's title and what it
 * means (RFC 9457: the answer's `title`, and the API description's text).
 * Handlers throw `AppError`; the HTTP edge turns anything else into a logged
 * 500 through `toHttpError`. docs/errors.md has a section for every code (a
 * test checks it).
 */
export const errorCodes = {
  validation_error: {
    status: 400,
    retryable: false,
    title: 'Validation error',
    means: 'the request is malformed: `details` lists every violation with its JSON Pointer',
  },
  /** The request itself is malformed or ambiguous (framing, an id header): answered before any handler runs. */
  bad_request: {
    status: 400,
    retryable: false,
    title: 'Bad request',
    means:
      'the request is ambiguous or malformed before any field is read (conflicting framing, an id header that is not exactly an id); framing errors close the connection',
  },
  unauthorized: { status: 401, retryable: false, title: 'Unauthorized', means: 'missing or invalid credentials' },
  forbidden: {
    status: 403,
    retryable: false,
    title: 'Forbidden',
    means: "the caller's role is too low for this operation",
  },
  not_found: {
    status: 404,
    retryable: false,
    title: 'Not found',
    means: "the resource does not exist in the caller's organization and team",
  },
  method_not_allowed: {
    status: 405,
    retryable: false,
    title: 'Method not allowed',
    means: 'the path exists but not with this method; `Allow` lists the methods it has',
  },
  conflict: {
    status: 409,
    retryable: false,
    title: 'Conflict',
    means: 'the request conflicts with the current state (a duplicate, or an Idempotency-Key still in use)',
  },
  payload_too_large: {
    status: 413,
    retryable: false,
    title: 'Payload too large',
    means: 'the body is larger than this operation accepts; the connection is closed',
  },
  unsupported_media_type: {
    status: 415,
    retryable: false,
    title: 'Unsupported media type',
    means: 'the body has a content type this operation does not read',
  },
  idempotency_mismatch: {
    status: 422,
    retryable: false,
    title: 'Idempotency key reused',
    means: 'this Idempotency-Key was used with a different body',
  },
  recipient_opted_out: {
    status: 422,
    retryable: false,
    title: 'Recipient opted out',
    means: "the recipient is on the organization's suppression list (they sent a stop keyword, or were added to it)",
  },
  header_fields_too_large: {
    status: 431,
    retryable: false,
    title: 'Header fields too large',
    means: 'the request has too many or too large header fields',
  },
  rate_limited: {
    status: 429,
    retryable: true,
    title: 'Rate limited',
    means: 'the rate limit is exceeded; wait Retry-After seconds',
  },
  internal_error: {
    status: 500,
    retryable: true,
    title: 'Internal error',
    means: 'an unexpected failure; quote X-Request-Id when reporting it',
  },
  service_unavailable: {
    status: 503,
    retryable: true,
    title: 'Service unavailable',
    means: 'a backend is unavailable or shutting down; retry after Retry-After seconds',
  },
} as const satisfies Record<string, { status: number; retryable: boolean; title: string; means: string }>;

export type ErrorCode = keyof typeof errorCodes;

export interface ErrorDetail {
  /** A JSON Pointer (RFC 6901) into the input that was checked: the JSON body, the query parameters, the path parameters or the headers; '' is the whole body. */
  path: string;
  message: string;
}

/** The media type of every error answer (RFC 9457). */
export const problemMediaType = 'application/problem+json';

/**
 * Where each code's problem type is documented: a path reference (RFC 3986,
 * 4.2), the same string on every deployment, that resolves against the
 * address the client called to a page the service serves itself
 * (`GET /errors/{code}`); docs/errors.md has the same sections.
 */
export const problemTypeOf = (code: ErrorCode): string => `/errors/${code}`;

/**
 * An error answer: RFC 9457 problem details (`type`, `title`, `status`,
 * `detail`, `instance`), with the members the API answered before them kept
 * as extension members (`error`, `message`, `statusCode`, `details`), so a
 * client that reads either keeps working.
 */
export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  /** The request id, as X-Request-Id carries it. */
  instance: string;
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

  constructor(
    code: ErrorCode,
    message: string,
    opts: { details?: ErrorDetail[]; retryAfterSeconds?: number; cause?: unknown } = {},
  ) {
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

  /** The answer's body; `requestId` names this occurrence (`instance`). */
  toProblem(requestId: string): Problem {
    const { title } = errorCodes[this.code];
    const body: Problem = {
      type: problemTypeOf(this.code),
      title,
      status: this.statusCode,
      detail: this.message,
      instance: requestId,
      error: this.code,
      message: this.message,
      statusCode: this.statusCode,
    };
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
