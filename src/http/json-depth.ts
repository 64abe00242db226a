import { pointer } from '../errors';

/**
 * How deep a JSON request body may nest arrays and objects, the body itself being 1. Every route's
 * body is at most 3 deep (`{"attributes": {"tags": ["a"]}}`); past this, values only serve to make
 * recursive code overflow its stack: Elysia's validation error formats the value it found with
 * `${value}`, one call per level, and a 12 KB array nested 4,000 deep made every POST route a 500
 * (issue 60). 32 leaves room for any body a route may take later.
 */
export const MAX_JSON_DEPTH = 32;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;

/**
 * Where a JSON text first nests deeper than `max`: the pointer of the body's top-level member that
 * holds it (a field, or an index of a body that is an array), or undefined when it nests no deeper.
 * A scan of the bytes before any parse, with no recursion: a body nested 500,000 deep stops here
 * after `max` brackets instead of costing JSON.parse 150 ms. Invalid JSON is the parser's to refuse;
 * this only counts brackets outside strings.
 */
export function tooDeepAt(bytes: Uint8Array, max = MAX_JSON_DEPTH): string | undefined {
  let depth = 0;
  let inString = false;
  let escaped = false;
  let stringStart = 0;
  // The top level's current member: the last string at depth 1 (in valid JSON, the key of a member
  // whose value opens a nested array or object), or the count of commas of a top-level array.
  let topArray = false;
  let keyStart = -1;
  let keyEnd = -1;
  let index = 0;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    if (inString) {
      if (escaped) escaped = false;
      else if (b === BACKSLASH) escaped = true;
      else if (b === QUOTE) {
        inString = false;
        if (depth === 1) [keyStart, keyEnd] = [stringStart, i + 1];
      }
    } else if (b === QUOTE) {
      inString = true;
      stringStart = i;
    } else if (b === OPEN_ARRAY || b === OPEN_OBJECT) {
      depth++;
      if (depth === 1) topArray = b === OPEN_ARRAY;
      else if (depth > max) return topArray ? pointer(index) : keyPointer(bytes, keyStart, keyEnd);
    } else if (b === CLOSE_ARRAY || b === CLOSE_OBJECT) depth--;
    else if (b === COMMA && depth === 1) index++;
  }
  return undefined;
}

/** The pointer of the key at `bytes[start, end)`, a JSON string; the body's own ('') if it is none. */
function keyPointer(bytes: Uint8Array, start: number, end: number): string {
  if (start < 0) return '';
  try {
    const key: unknown = JSON.parse(new TextDecoder().decode(bytes.subarray(start, end)));
    return typeof key === 'string' ? pointer(key) : '';
  } catch {
    return '';
  }
}
