// Bodies nested too deep (issue 60, item 2): an array 4,000 deep in a string field made Elysia's
// validation error overflow the stack, a 500 on a dozen routes. The one body reader refuses any body
// nested deeper than MAX_JSON_DEPTH with a 400 before anything else reads it; every route that takes
// a JSON body is tried, as the OpenAPI document lists them, with arrays and objects 10,000 deep.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { MAX_JSON_DEPTH, tooDeepAt } from '../../src/http/json-depth';
import { expectProblem, testApp, type TestApp } from '../helpers/app';

let t: TestApp;
beforeAll(async () => {
  t = await testApp();
});
afterAll(() => t.close());

const DEEP = 10_000;
const TOO_DEEP = `The request body nests arrays and objects more than ${MAX_JSON_DEPTH} deep.`;
const json = { 'content-type': 'application/json' };
const arrays = (n: number) => '['.repeat(n) + ']'.repeat(n);
const objects = (n: number) => '{"a":'.repeat(n) + '1' + '}'.repeat(n);
const bytes = (text: string) => new TextEncoder().encode(text);

interface Operation {
  method: string;
  path: string;
  fields: string[];
}

/** Every operation of the API's OpenAPI document that takes a JSON body, with its body's fields. */
async function bodyOperations(): Promise<Operation[]> {
  const doc = await t.call('GET', '/docs/json', { key: null });
  expect(doc.status).toBe(200);
  const ops: Operation[] = [];
  for (const [template, item] of Object.entries(doc.body.paths as Record<string, Record<string, any>>)) {
    for (const [method, op] of Object.entries(item)) {
      const schema = op?.requestBody?.content?.['application/json']?.schema;
      if (!schema) continue;
      // Any id will do: the body is read before the route looks anything up.
      const path = template.replace(/\{[^}]+\}/g, '00000000-0000-4000-8000-000000000000');
      ops.push({ method: method.toUpperCase(), path, fields: Object.keys(schema.properties ?? {}) });
    }
  }
  return ops;
}

describe('a body nested deeper than the limit is a 400 on every route that takes one', () => {
  test('each field of each body route, and the body itself, as arrays and as objects 10,000 deep', async () => {
    const ops = await bodyOperations();
    // POST contacts, PATCH a contact, disable, brands and subscriptions, erasures, records, checks,
    // imports and their cancel, webhook endpoints, exports: 12 when this was written.
    expect(ops.length).toBeGreaterThanOrEqual(12);
    let tried = 0;
    for (const { method, path, fields } of ops) {
      // A body route without fields (disable, cancel) still reads the body: an unknown field then.
      const cases: [string, string][] = [
        [arrays(DEEP), '/0'],
        [objects(DEEP), '/a'],
        ...(fields.length ? fields : ['x']).flatMap((f): [string, string][] => [
          [`{${JSON.stringify(f)}: ${arrays(DEEP)}}`, `/${f}`],
          [`{${JSON.stringify(f)}: ${objects(DEEP)}}`, `/${f}`],
        ]),
      ];
      for (const [raw, pointer] of cases) {
        const res = await t.call(method, path, { raw, headers: json });
        const seen = { route: `${method} ${path}`, status: res.status, body: res.body };
        expect(seen).toMatchObject({ status: 400 });
        const problem = expectProblem(res, 400, 'invalid_request_error');
        expect({ route: seen.route, problem }).toEqual({
          route: seen.route,
          problem: expect.objectContaining({
            detail: TOO_DEEP,
            instance: path,
            errors: [{ detail: TOO_DEEP, pointer }],
          }),
        });
        tried++;
      }
    }
    expect(tried).toBeGreaterThanOrEqual(12 * 4);
  }, 60_000);

  test('the case of the issue: a 12 KB array 4,000 deep in a string field is a 400, not a 500', async () => {
    const res = await t.call('POST', '/v1/contacts', { raw: `{"email": ${arrays(4_000)}}`, headers: json });
    expect(expectProblem(res, 400, 'invalid_request_error').errors).toEqual([{ detail: TOO_DEEP, pointer: '/email' }]);
  });

  test('a body exactly at the limit is read, and answered by its route', async () => {
    // {"email": [[…]]}: the body is 1 deep, the arrays the rest.
    const atLimit = `{"email": ${arrays(MAX_JSON_DEPTH - 1)}}`;
    const res = await t.call('POST', '/v1/contacts', { raw: atLimit, headers: json });
    const problem = expectProblem(res, 400, 'invalid_request_error');
    expect(problem.detail).not.toBe(TOO_DEEP);
    expect(problem.errors).toEqual([{ detail: expect.any(String), pointer: '/email' }]);
    const over = await t.call('POST', '/v1/contacts', { raw: `{"email": ${arrays(MAX_JSON_DEPTH)}}`, headers: json });
    expect(expectProblem(over, 400, 'invalid_request_error').detail).toBe(TOO_DEEP);
  });

  test('a valid body of the deepest shape a route takes is unaffected', async () => {
    const res = await t.call('POST', '/v1/contacts', {
      body: { email: 'nesting@example.com', attributes: {} },
    });
    expect(res.status).toBe(201);
  });
});

describe('tooDeepAt: the scan', () => {
  test('counts brackets outside strings only', () => {
    const inStrings = `{"a": "${'['.repeat(100)}", "b": ["\\"${'{'.repeat(100)}"]}`;
    expect(tooDeepAt(bytes(inStrings), 3)).toBeUndefined();
    expect(tooDeepAt(bytes('{"a": [[1]]}'), 3)).toBeUndefined();
    expect(tooDeepAt(bytes('{"a": [[[1]]]}'), 3)).toBe('/a');
  });

  test('names the top-level member that holds it, escaped as a pointer', () => {
    expect(tooDeepAt(bytes(`{"x": "]", "a/b~c\\u0021": ${arrays(5)}}`), 3)).toBe('/a~1b~0c!');
    expect(tooDeepAt(bytes(`{"x": {"y": [1]}, "z": ${objects(5)}}`), 3)).toBe('/z');
    expect(tooDeepAt(bytes(`[1, "],[", {"k": 2}, ${arrays(5)}]`), 3)).toBe('/3');
  });

  test('a body nested 500,000 deep is refused after the limit, not parsed', () => {
    const huge = bytes(arrays(500_000));
    const started = performance.now();
    expect(tooDeepAt(huge)).toBe('/0');
    expect(performance.now() - started).toBeLessThan(50);
  });
});
