/**
 * Problem codes of the spec and the factories services throw. Only src/http/problem.ts knows how
 * an ApiError becomes an HTTP response.
 */
export type ErrorCode =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'contact_exists'
  | 'operation_in_progress'
  | 'conflict_error'
  | 'rate_limit_error'
  | 'api_error';

export interface FieldError {
  detail: string;
  pointer?: string;
  parameter?: string;
}

export const statusOf: Record<ErrorCode, number> = {
  invalid_request_error: 400,
  authentication_error: 401,
  permission_error: 403,
  not_found_error: 404,
  contact_exists: 409,
  operation_in_progress: 409,
  conflict_error: 409,
  rate_limit_error: 429,
  api_error: 500,
};

export const titleOf: Record<ErrorCode, string> = {
  invalid_request_error: 'Invalid request',
  authentication_error: 'Authentication failed',
  permission_error: 'Permission denied',
  not_found_error: 'Not found',
  contact_exists: 'Contact exists',
  operation_in_progress: 'Operation in progress',
  conflict_error: 'Conflict',
  rate_limit_error: 'Too many requests',
  api_error: 'Internal error',
};

export class ApiError extends Error {
  readonly status: number;
  readonly title: string;
  constructor(
    readonly code: ErrorCode,
    readonly detail: string,
    readonly errors?: FieldError[],
    /** Whole seconds, for operation_in_progress, rate_limit_error and an unavailable database. */
    readonly retryAfter?: number,
    /** `status` and `title` replace the code's own (api_error is 500, or 503 while the database is away). */
    options?: { cause?: unknown; status?: number; title?: string },
  ) {
    super(detail, options);
    this.status = options?.status ?? statusOf[code];
    this.title = options?.title ?? titleOf[code];
  }
}

/** RFC 6901 pointer from raw segments: `pointer('attributes', 'a/b')` → `/attributes/a~1b`. */
export function pointer(...segments: Array<string | number>): string {
  return segments.map((s) => '/' + String(s).replaceAll('~', '~0').replaceAll('/', '~1')).join('');
}

export const invalidRequest = (detail: string, errors?: FieldError[]) =>
  new ApiError('invalid_request_error', detail, errors);
export const invalidField = (ptr: string, detail: string) =>
  new ApiError('invalid_request_error', detail, [{ detail, pointer: ptr }]);
export const invalidParameter = (parameter: string, detail: string) =>
  new ApiError('invalid_request_error', detail, [{ detail, parameter }]);
export const unauthenticated = (
  detail = 'A valid API key is required in the Authorization header as "Bearer <key>".',
) => new ApiError('authentication_error', detail);
export const forbidden = (detail: string) => new ApiError('permission_error', detail);
export const notFound = (detail: string) => new ApiError('not_found_error', detail);
export const contactExists = (detail: string) => new ApiError('contact_exists', detail);
export const operationInProgress = (detail: string, retryAfterSeconds: number) =>
  new ApiError('operation_in_progress', detail, undefined, Math.max(1, Math.ceil(retryAfterSeconds)));
export const conflict = (detail: string) => new ApiError('conflict_error', detail);
/** 429: the account is over its rate limit (src/ratelimit); a request after `retryAfterSeconds` is admitted. */
export const rateLimited = (retryAfterSeconds: number) =>
  new ApiError(
    'rate_limit_error',
    `The account's requests are over its rate limit; send again in ${retryAfterSeconds} s (Retry-After).`,
    undefined,
    Math.max(1, Math.ceil(retryAfterSeconds)),
  );
/** 503 api_error: a service the request needs (the database) is away; the same request can succeed later. */
export const serviceUnavailable = (detail: string, retryAfterSeconds: number, cause?: unknown) =>
  new ApiError('api_error', detail, undefined, Math.max(1, Math.ceil(retryAfterSeconds)), {
    cause,
    status: 503,
    title: 'Service unavailable',
  });
