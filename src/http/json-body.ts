import { invalidRequest } from '../errors';

/**
 * Reads a JSON request body with a size limit. Bun's own limit is raised for 5 GB uploads, so JSON
 * bodies are bounded here, streaming, whether or not Content-Length is sent (a chunked request has
 * none, and must not slip past the limit).
 */
export async function readJsonBody(request: Request, limitBytes: number): Promise<unknown> {
  const type = request.headers.get('content-type') ?? '';
  const length = request.headers.get('content-length');
  const declared = length === null ? undefined : Number(length);
  if (!request.body || declared === 0) {
    if (type && !isJson(type)) throw notJson();
    return undefined;
  }
  if (!isJson(type)) throw notJson();
  if (declared !== undefined && declared > limitBytes) throw tooLarge(limitBytes);
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of request.body as unknown as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (size > limitBytes) throw tooLarge(limitBytes);
    chunks.push(chunk);
  }
  if (size === 0) return undefined;
  const text = new TextDecoder('utf-8', { fatal: false }).decode(Buffer.concat(chunks));
  try {
    return JSON.parse(text);
  } catch {
    throw invalidRequest('The request body is not valid JSON.');
  }
}

function isJson(contentType: string): boolean {
  const mime = contentType.split(';')[0]!.trim().toLowerCase();
  return mime === 'application/json' || mime.endsWith('+json');
}

const notJson = () => invalidRequest('The request body must be JSON (Content-Type: application/json).');

function tooLarge(limit: number) {
  return invalidRequest(`The request body is larger than the limit of ${limit} bytes.`);
}
