/**
 * The one error registry: every error code the API can answer, with its HTTP
 * status and whether a caller may retry. Handlers throw `AppError`; the HTTP
 * edge turns anything else into a logged 500 through `toHttpError`.
 */
export const errorCodes = {
  validation_error: { status: 400, retryable: false },
  unauthorized: { status: 401, retryable: false },
  forbidden: { status: 403, retryable: false },
  not_found: { status: 404, retryable: false },
  conflict: { status: 409, retryable: false },
  payload_too_large: { status: 413, retryable: false },
  unsupported_media_type: { status: 415, retryable: false },
  idempotency_mismatch: { status: 422, retryable: false },
  rate_limited: { status: 429, retryable: true },
  internal_error: { status: 500, retryable: true },
  service_unavailable: { status: 503, retryable: true },
} as const;

export type ErrorCode = keyof typeof errorCodes;

export interface ErrorDetail {
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

export function validationError(path: string, message: string): AppError {
  return new AppError('validation_error', `${path}: ${message}`, { details: [{ path, message }] });
}

/** What the client sees for any thrown value: an AppError as it is, anything else a bare 500. */
export function toHttpError(err: unknown): AppError {
  if (err instanceof AppError) return err;
  return new AppError('internal_error', 'internal error', { cause: err });
}
