import { invalidField, invalidRequest, pointer } from '../errors';

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Checks a raw JSON body before Elysia validates it. Elysia's normaliser (exact-mirror) drops unknown
 * properties and turns an array or a string into an object (`[]` → `{}`, `"x"` → `{"0":"x"}`), so
 * without this a typo such as `overwritebrands` would be ignored silently and `attributes: []` would
 * pass as empty. Runs as the route's `transform` hook, which sees the body as parsed.
 */
export function assertBodyShape(
  body: unknown,
  fields: { allowed: readonly string[]; objects: readonly string[] },
  optional = false,
): void {
  if (body === undefined && optional) return;
  if (!isPlainObject(body)) throw invalidField('', 'The request body must be a JSON object.');
  const unknown = Object.keys(body).filter((k) => !fields.allowed.includes(k));
  if (unknown.length) {
    const errors = unknown.map((k) => ({ detail: `Unknown field ${k}.`, pointer: pointer(k) }));
    throw invalidRequest(
      fields.allowed.length
        ? `Unknown field ${unknown[0]}. Accepted fields: ${fields.allowed.join(', ')}.`
        : 'This request takes no body fields.',
      errors,
    );
  }
  for (const k of fields.objects) {
    if (k in body && !isPlainObject(body[k])) throw invalidField(pointer(k), `${k} must be a JSON object.`);
  }
}
