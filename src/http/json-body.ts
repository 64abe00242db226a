import { invalidField, invalidRequest } from '../errors';
import { MAX_JSON_DEPTH, tooDeepAt } from './json-depth';

/**
 * Reads a JSON request body with a size limit and a nesting limit (src/http/json-depth.ts), the one
 * reader of every route's body: nothing after it (validation, its errors, the routes) ever sees a
 * value nested deeper than MAX_JSON_DEPTH. Bun's own limit is raised for 5 GB uploads, so JSON
 * bodies are bounded here whether or not Content-Length is sent: a chunked request has none and is
 * read streaming, so that it cannot slip past the limit.
 */
export async function readJsonBody(
  request: Request,
  limitBytes: number,
  keep?: (bytes: Uint8Array) => void,
): Promise<unknown> {
  const type = request.headers.get('content-type') ?? '';
  const length = request.headers.get('content-length');
  const declared = length === null ? undefined : Number(length);
  if (!request.body || declared === 0) {
    if (type && !isJson(type)) throw notJson();
    return undefined;
  }
  if (!isJson(type)) throw notJson();
  if (declared !== undefined && declared > limitBytes) throw tooLarge(limitBytes);
  // With a Content-Length and no Transfer-Encoding the body is framed by that length, so it cannot
  // pass the limit checked above: read it natively (streaming it through JS cost a POST about a tenth
  // of its CPU). The size is checked again for requests built in-process, where the header frames
  // nothing.
  if (
    declared !== undefined &&
    Number.isSafeInteger(declared) &&
    declared >= 0 &&
    !request.headers.has('transfer-encoding')
  ) {
    const bytes = new Uint8Array(await request.arrayBuffer());
    if (bytes.byteLength > limitBytes) throw tooLarge(limitBytes);
    keep?.(bytes);
    return parseJson(bytes);
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of request.body as unknown as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (size > limitBytes) throw tooLarge(limitBytes);
    chunks.push(chunk);
  }
  const bytes = Buffer.concat(chunks);
  keep?.(bytes);
  return parseJson(bytes);
}

function parseJson(bytes: Uint8Array): unknown {
  if (bytes.byteLength === 0) return undefined;
  const deep = tooDeepAt(bytes);
  if (deep !== undefined)
    throw invalidField(deep, `The request body nests arrays and objects more than ${MAX_JSON_DEPTH} deep.`);
  let text: string;
  try {
    // JSON is UTF-8 (RFC 8259): a lenient decoder would store each invalid byte as U+FFFD.
    text = UTF8.decode(bytes);
  } catch {
    throw invalidRequest('The request body is not valid JSON: it is not valid UTF-8.');
  }
  try {
    return JSON.parse(text);
  } catch {
    throw invalidRequest('The request body is not valid JSON.');
  }
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

function isJson(contentType: string): boolean {
  const mime = contentType.split(';')[0]!.trim().toLowerCase();
  return mime === 'application/json' || mime.endsWith('+json');
}

const notJson = () => invalidRequest('The request body must be JSON (Content-Type: application/json).');

function tooLarge(limit: number) {
  return invalidRequest(`The request body is larger than the limit of ${limit} bytes.`);
}
