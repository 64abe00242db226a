import type { ApiError, ErrorCode, FieldError } from '../errors';

export interface ProblemBody {
  type: string;
  status: number;
  title: string;
  detail: string;
  code: ErrorCode;
  instance?: string;
  errors?: FieldError[];
}

/** The one mapping from an ApiError to an RFC 9457 response. */
export function problemResponse(error: ApiError, docsUrl: string, instance?: string): Response {
  const body: ProblemBody = {
    type: `${docsUrl}/error-codes#${error.code}`,
    status: error.status,
    title: error.title,
    detail: error.detail,
    code: error.code,
  };
  if (instance) body.instance = instance;
  if (error.errors?.length) body.errors = error.errors;
  const headers: Record<string, string> = { 'content-type': 'application/problem+json' };
  if (error.code === 'authentication_error') headers['www-authenticate'] = 'Bearer realm="contacts"';
  if (error.retryAfter !== undefined) headers['retry-after'] = String(error.retryAfter);
  return new Response(JSON.stringify(body), { status: body.status, headers });
}
