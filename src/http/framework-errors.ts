import { ApiError, invalidRequest, notFound, pointer, type FieldError } from '../errors';
import { PARAMETER } from './pagination';

interface ValueErrorLike {
  path: string;
  message: string;
  schema?: { error?: unknown };
}

interface ValidationLike {
  type?: string;
  value?: unknown;
  validator?: { Errors?: (value: unknown) => Iterable<ValueErrorLike | undefined> };
  all?: ValueErrorLike[];
}

/** Errors of one validation listed at most, as Elysia lists them. */
const MAX_ERRORS = 64;

/**
 * The errors of a failed validation, at most MAX_ERRORS, from the validator's own iterator. Not from
 * Elysia's `all`, which formats each error with the value it found (`${value}`, one call per level of
 * a nested array: a deep one overflowed the stack, issue 60); the body reader bounds nesting too.
 * Whatever else goes wrong listing them gives none: the answer stays a 400, never a 500.
 */
function valueErrors(v: ValidationLike): ValueErrorLike[] {
  const found: ValueErrorLike[] = [];
  try {
    const source = typeof v.validator?.Errors === 'function' ? v.validator.Errors(v.value) : (v.all ?? []);
    for (const e of source) {
      if (e) found.push(e);
      if (found.length >= MAX_ERRORS) break;
    }
  } catch {
    // The errors found so far, or none.
  }
  return found;
}

// Messages for parameters whose TypeBox error text would be unhelpful ("Expected union value").
function customMessage(e: ValueErrorLike): string | undefined {
  return typeof e.schema?.error === 'string' ? e.schema.error : undefined;
}

/** Unescapes a JSON pointer segment the way RFC 6901 says. */
function segment(path: string): string {
  return path.replace(/^\//, '').split('/')[0]!.replaceAll('~1', '/').replaceAll('~0', '~');
}

/**
 * Turns Elysia's framework failures (validation, parse, unknown route) into ApiErrors. Validation
 * failures are 400 with a JSON pointer for body fields and `parameter` for query and path values,
 * never 422.
 */
export function fromFramework(code: unknown, error: unknown): ApiError | undefined {
  if (error instanceof ApiError) return error;
  if (code === 'NOT_FOUND') return notFound('No such route. Every path lives under /v1.');
  if (code === 'PARSE') {
    // Elysia wraps whatever a parse hook throws (readJsonBody's size and content-type problems).
    const cause = (error as { cause?: unknown })?.cause;
    return cause instanceof ApiError ? cause : invalidRequest('The request body is not valid JSON.');
  }
  if (code === 'VALIDATION') {
    const v = error as ValidationLike;
    // A response that fails its own schema is our fault, not the client's: let it become api_error.
    if (v.type === 'response') return undefined;
    // A coerced value (a query number such as page=0) checked on its own, without its path.
    if (v.type === 'property') return propertyError(error as { validator?: Record<string, unknown> }, valueErrors(v));
    const all = valueErrors(v).filter((e) => e.path !== undefined);
    const first = all[0];
    const where = v.type ?? 'body';
    if (!first) return invalidRequest(`The request ${where} is not valid.`);
    const errors: FieldError[] = [];
    const seen = new Set<string>();
    for (const e of all) {
      const path = e.path === '' ? '' : e.path;
      if (seen.has(path)) continue;
      seen.add(path);
      const detail = customMessage(e) ?? describe(where, path, e.message);
      if (where === 'body') errors.push({ detail, pointer: path });
      else errors.push({ detail, parameter: segment(path) });
    }
    return invalidRequest(errors[0]!.detail, errors);
  }
  return undefined;
}

/**
 * What to log about a failure that became api_error. Elysia's response-validation message embeds the
 * whole response (emails included), so only the paths and messages of its errors are kept.
 */
export function failureLogFields(code: unknown, error: unknown): Record<string, unknown> | undefined {
  if (code !== 'VALIDATION') return undefined;
  const v = error as ValidationLike;
  return {
    error: `${v.type ?? 'unknown'} validation failed`,
    problems: valueErrors(v)
      .slice(0, 5)
      .map((e) => `${e.path}: ${e.message}`),
  };
}

function propertyError(error: { validator?: Record<string, unknown> }, all: ValueErrorLike[]): ApiError {
  const first = all[0];
  const detail = (first && customMessage(first)) ?? `A request value is not valid${first ? `: ${first.message}` : ''}.`;
  const parameter = error.validator?.[PARAMETER];
  return invalidRequest(detail, typeof parameter === 'string' ? [{ detail, parameter }] : undefined);
}

function describe(where: string, path: string, message: string): string {
  if (where === 'body') return path === '' ? `The request body is not valid: ${message}.` : `${path}: ${message}.`;
  return `The ${where === 'params' ? 'path' : 'query'} parameter ${segment(path)} is not valid: ${message}.`;
}

export { pointer };
