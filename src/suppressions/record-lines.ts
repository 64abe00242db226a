import { normaliseRecord, type ListFormat } from './records';

export interface LineCounts {
  /** Lines that held a record of the list's format. */
  valid: number;
  /** Non-blank lines that did not. */
  malformed: number;
}

/**
 * How records are staged for COPY, per format. md5 records go in as uuid (32 hex digits are valid
 * uuid input; uuid_send gives the 16 bytes back): uuid sorts with abbreviated keys and bytea does
 * not, and sorting is the second most expensive step of a large import. The rest go in as bytea
 * in hex input form, `\\x…` in COPY text (COPY turns `\\` into one backslash).
 */
export const STAGING: Record<ListFormat, { type: 'uuid' | 'bytea'; prefix: Buffer }> = {
  md5: { type: 'uuid', prefix: Buffer.alloc(0) },
  sha512: { type: 'bytea', prefix: Buffer.from('\\\\x') },
  'plain text': { type: 'bytea', prefix: Buffer.from('\\\\x') },
};

const NL = 0x0a;
const COMMA = 0x2c;
// A line longer than this cannot hold a record (an address is at most 254 characters); it is
// counted as malformed without being buffered.
const MAX_LINE = 64 * 1024;
const HEX_LENGTH: Record<ListFormat, number> = { md5: 32, sha512: 128, 'plain text': -1 };

const isSpace = (c: number) => c === 0x20 || (c >= 0x09 && c <= 0x0d);

/**
 * The record of a file line: the first CSV field, trimmed, without surrounding quotes. A line that
 * holds just the record is its own first field.
 * @example firstField(' "Ann@Example.com",Ann ') // 'Ann@Example.com'
 */
export function firstField(line: string): string {
  const t = line.trim();
  if (t.startsWith('"')) {
    const close = t.indexOf('"', 1);
    return close < 0 ? t.slice(1) : t.slice(1, close);
  }
  const comma = t.indexOf(',');
  return comma < 0 ? t : t.slice(0, comma);
}

/**
 * A pipeline stage from file bytes to COPY text rows of the staging column (see STAGING).
 * Blank lines are skipped; lines without a record of the format are counted as malformed. Lines
 * are split with Buffer#indexOf and md5/sha512 records are checked and lowercased on the bytes, so
 * the hot path makes no string per line; anything else (quotes, non-ASCII spaces, addresses)
 * takes the string path through the API's own rules, so a file and a request accept the same.
 */
export function copyRows(format: ListFormat, counts: LineCounts) {
  const hexLength = HEX_LENGTH[format];
  const prefix = STAGING[format].prefix;

  function writeRecord(out: Buffer, o: number, line: Buffer, start: number, end: number): number {
    if (hexLength > 0) {
      // Fast path: an unquoted hex record, maybe padded, maybe followed by more CSV fields.
      let s = start;
      while (s < end && isSpace(line[s]!)) s++;
      let e = s;
      while (e < end && line[e] !== COMMA) e++;
      while (e > s && isSpace(line[e - 1]!)) e--;
      if (e - s === hexLength) {
        let w = o + prefix.copy(out, o);
        for (let i = s; i < e; i++) {
          const c = line[i]!;
          const l = c | 0x20;
          if ((c >= 0x30 && c <= 0x39) || (l >= 0x61 && l <= 0x66)) out[w++] = c <= 0x39 ? c : l;
          else {
            w = -1;
            break;
          }
        }
        if (w >= 0) {
          out[w++] = NL;
          counts.valid++;
          return w;
        }
      }
    }
    const text = line.toString('utf8', start, end);
    const record = normaliseRecord(format, firstField(text));
    if (record === undefined) {
      if (text.trim() !== '') counts.malformed++;
      return o;
    }
    counts.valid++;
    o += prefix.copy(out, o);
    const hex = format === 'plain text' ? Buffer.from(record, 'utf8').toString('hex') : record;
    o += out.write(hex, o, 'latin1');
    out[o++] = NL;
    return o;
  }

  /** The whole lines of buf[start, end) as COPY rows. */
  function convert(buf: Buffer, start: number, end: number): Buffer {
    // Worst case: a 5-character address line becomes `\\x` + 10 hex digits + newline.
    const out = Buffer.allocUnsafe((end - start) * 3 + 64);
    let o = 0;
    for (let pos = start; pos < end; ) {
      let nl = buf.indexOf(NL, pos);
      if (nl < 0 || nl > end) nl = end;
      o = writeRecord(out, o, buf, pos, nl);
      pos = nl + 1;
    }
    return out.subarray(0, o);
  }

  return async function* (source: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
    let carry: Buffer | undefined;
    let first = true;
    let skipping = false; // inside an over-long line
    for await (const piece of source) {
      let chunk = piece;
      if (first) {
        first = false;
        if (chunk[0] === 0xef && chunk[1] === 0xbb && chunk[2] === 0xbf) chunk = chunk.subarray(3);
      }
      if (skipping) {
        const nl = chunk.indexOf(NL);
        if (nl < 0) continue;
        skipping = false;
        chunk = chunk.subarray(nl + 1);
      }
      const buf = carry ? Buffer.concat([carry, chunk]) : chunk;
      carry = undefined;
      const last = buf.lastIndexOf(NL);
      if (last >= 0) {
        const rows = convert(buf, 0, last);
        if (rows.length > 0) yield rows;
      }
      const rest = buf.length - (last + 1);
      if (rest > MAX_LINE) {
        counts.malformed++;
        skipping = true;
      } else if (rest > 0) carry = Buffer.from(buf.subarray(last + 1));
    }
    if (carry) {
      const rows = convert(carry, 0, carry.length);
      if (rows.length > 0) yield rows;
    }
  };
}
