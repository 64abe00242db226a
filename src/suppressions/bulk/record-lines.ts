import { COPY_BINARY_HEADER, COPY_BINARY_TRAILER } from '../../db';
import { normaliseRecord, type ListFormat } from '../records';

export interface LineCounts {
  /** Lines that held a record of the list's format. */
  valid: number;
  /** Non-blank lines that did not. */
  malformed: number;
}

const NL = 0x0a;
const COMMA = 0x2c;
// A line longer than this cannot hold a record (an address is at most 254 characters); it is
// counted as malformed without being buffered.
const MAX_LINE = 64 * 1024;
const HEX_LENGTH: Record<ListFormat, number> = { md5: 32, sha512: 128, 'plain text': -1 };

const isSpace = (c: number) => c === 0x20 || (c >= 0x09 && c <= 0x0d);
// Byte → its value as a hex digit (either case), -1 for anything else.
const NIBBLE = new Int8Array(256).fill(-1);
for (let i = 0; i < 16; i++) {
  NIBBLE['0123456789abcdef'.charCodeAt(i)] = i;
  NIBBLE['0123456789ABCDEF'.charCodeAt(i)] = i;
}

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
 * A pipeline stage from file bytes to binary COPY tuples of one field, the record's stored bytes
 * (`int16 1, int32 length, bytes`; see copyFraming for the stream around them). Blank lines are
 * skipped; lines without a record of the format are counted as malformed. Lines are split with
 * Buffer#indexOf and md5/sha512 records are checked and decoded on the bytes, so the hot path makes
 * no string per line; anything else (quotes, non-ASCII spaces, addresses) takes the string path
 * through the API's own rules, so a file and a request accept the same records.
 */
export function recordRows(format: ListFormat, counts: LineCounts) {
  const hexLength = HEX_LENGTH[format];

  /** Writes the row for line[start, end) at out[o] and returns the new offset. */
  function writeRecord(out: Buffer, o: number, line: Buffer, start: number, end: number): number {
    if (hexLength > 0) {
      // Fast path: an unquoted hex record, maybe padded, maybe followed by more CSV fields.
      let s = start;
      while (s < end && isSpace(line[s]!)) s++;
      let e = s;
      while (e < end && line[e] !== COMMA) e++;
      while (e > s && isSpace(line[e - 1]!)) e--;
      if (e - s === hexLength) {
        let w = out.writeInt32BE(hexLength / 2, out.writeInt16BE(1, o));
        for (let i = s; i < e; i += 2) {
          const high = NIBBLE[line[i]!]!;
          const low = NIBBLE[line[i + 1]!]!;
          if ((high | low) < 0) {
            w = -1;
            break;
          }
          out[w++] = (high << 4) | low;
        }
        if (w >= 0) {
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
    const bytes = Buffer.from(record, format === 'plain text' ? 'utf8' : 'hex');
    o = out.writeInt32BE(bytes.length, out.writeInt16BE(1, o));
    return o + bytes.copy(out, o);
  }

  /** The whole lines of buf[start, end) as COPY rows. */
  function convert(buf: Buffer, start: number, end: number): Buffer {
    // Worst case: a 5-character address line of 6 bytes becomes a 6-byte row header and 5 bytes.
    const out = Buffer.allocUnsafe((end - start) * 2 + 64);
    let o = 0;
    for (let pos = start; pos < end;) {
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

/** A binary COPY stream around tuples: the header, the tuples, the trailer. Also a pipeline stage. */
export async function* copyFraming(tuples: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  yield COPY_BINARY_HEADER;
  yield* tuples;
  yield COPY_BINARY_TRAILER;
}
