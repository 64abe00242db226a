import { t } from 'elysia';

/** The RFC 9457 envelope, for the OpenAPI document. */
export const Problem = t.Object(
  {
    type: t.String({ format: 'uri' }),
    status: t.Integer(),
    title: t.String(),
    detail: t.String(),
    code: t.String({
      enum: [
        'invalid_request_error',
        'authentication_error',
        'permission_error',
        'not_found_error',
        'contact_exists',
        'operation_in_progress',
        'conflict_error',
        'api_error',
      ],
    } as never),
    instance: t.Optional(t.String()),
    errors: t.Optional(
      t.Array(t.Object({ detail: t.String(), pointer: t.Optional(t.String()), parameter: t.Optional(t.String()) })),
    ),
  },
  { description: 'RFC 9457 problem details (application/problem+json)' },
);

/** Error responses every /v1 route documents (401, 403, 500) plus the ones given. */
export function errorResponses(...statuses: number[]) {
  const all = [...new Set([...statuses, 401, 403, 500])];
  return Object.fromEntries(all.map((s) => [s, Problem])) as Record<number, typeof Problem>;
}
