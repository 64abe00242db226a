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
        'rate_limit_error',
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

/** Error responses every /v1 route documents (401, 403, 429, 500) plus the ones given. */
export function errorResponses(...statuses: number[]) {
  const all = [...new Set([...statuses, 401, 403, 429, 500])];
  return Object.fromEntries(all.map((s) => [s, Problem])) as Record<number, typeof Problem>;
}

type Json = Record<string, unknown>;

const REASONS: Record<string, string> = {
  '200': 'OK',
  '201': 'Created',
  '204': 'No content',
  '400': 'Invalid request (invalid_request_error)',
  '401': 'Missing or invalid API key (authentication_error)',
  '403': 'The key lacks the scope (permission_error)',
  '404': 'Not found (not_found_error)',
  '409': 'Conflict (contact_exists, operation_in_progress or conflict_error)',
  '410': 'The cursor is older than the event retention: events after it were removed (conflict_error)',
  '429':
    "An extension beyond the contract: the account's requests are over its rate limit (rate_limit_error); " +
    'nothing was done. Send again after Retry-After.',
  '500': 'Unexpected error (api_error)',
  '503': 'Not ready',
};

/** TypeBox keywords that are not JSON Schema (`error` is this service's validation message). */
function schemaOnly(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(schemaOnly);
  if (value === null || typeof value !== 'object') return value;
  const out: Json = {};
  for (const [k, v] of Object.entries(value)) {
    if (k === 'error' && (typeof v === 'string' || typeof v === 'function')) continue;
    out[k] = schemaOnly(v);
  }
  return out;
}

const CSV = 'text/csv';

/** The fields of a 429 (docs/rate-limits.md); admitted answers carry the two RateLimit ones too. */
const RATE_LIMIT_HEADERS: Json = {
  'Retry-After': {
    description: 'Whole seconds (at least 1) after which the same request is admitted.',
    schema: { type: 'integer', minimum: 1 },
  },
  'RateLimit-Policy': {
    description:
      "The account's limit, as draft-ietf-httpapi-ratelimit-headers-10 defines the field: " +
      '`"account";q=<burst>;w=<seconds the bucket takes to refill>`.',
    schema: { type: 'string' },
  },
  RateLimit: {
    description: 'What remains: `"account";r=0;t=<seconds>` on a 429 (t as Retry-After).',
    schema: { type: 'string' },
  },
};

function schemaOf(content: unknown): unknown {
  const media = (content ?? {}) as Record<string, { schema?: unknown } | undefined>;
  return media['application/json']?.schema ?? Object.values(media)[0]?.schema;
}

function finishOperation(operation: Json): Json {
  const out = { ...operation };
  const body = out.requestBody as Json | undefined;
  if (body?.content) out.requestBody = { ...body, content: { 'application/json': { schema: schemaOf(body.content) } } };
  const responses: Json = {};
  for (const [status, given] of Object.entries((out.responses ?? {}) as Record<string, Json>)) {
    const schema = schemaOf(given.content);
    const error = Number(status) >= 400;
    const described = error ? (REASONS[status] ?? given.description) : (given.description ?? REASONS[status]);
    const response: Json = { ...given, description: described ?? `HTTP ${status}` };
    if (status === '429') response.headers = RATE_LIMIT_HEADERS;
    // A success declared as CSV alone (the rejected-rows report) stays CSV; every other body is JSON.
    const csv = !error && Object.keys((given.content ?? {}) as Json).join() === CSV;
    if (schema)
      response.content = { [error ? 'application/problem+json' : csv ? CSV : 'application/json']: { schema } };
    else delete response.content;
    responses[status] = response;
  }
  out.responses = responses;
  return out;
}

/**
 * Finishes the document the swagger plugin builds from the routes, in one place: OpenAPI 3.1 (JSON
 * Schema 2020-12, so TypeBox's const and patternProperties are valid) without TypeBox's non-schema
 * keywords, the service's public URL as its server, and every response described, with JSON bodies
 * only (errors as application/problem+json), but for a success its route declares as text/csv. The
 * list routes are declared without a trailing slash (`''` under their prefix), so the paths need no
 * rewriting here.
 */
export function finishOpenApi(doc: Json, publicUrl: string): Json {
  const clean = schemaOnly(doc) as Json;
  const paths: Json = {};
  for (const [path, item] of Object.entries((clean.paths ?? {}) as Record<string, Json>)) {
    const operations: Json = {};
    for (const [method, operation] of Object.entries(item)) operations[method] = finishOperation(operation as Json);
    paths[path] = operations;
  }
  return { ...clean, openapi: '3.1.0', servers: [{ url: publicUrl }], paths };
}
