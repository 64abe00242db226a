import { COPY_BINARY_HEADER, COPY_BINARY_TRAILER } from '../../src/db';
import type { StagedRow } from './cells';

/**
 * The staging table's rows (rowsTableDdl's columns but `account_id`, which its default fills) in
 * PostgreSQL's binary COPY format: a COPY statement's bytes are the header, the rows, then the
 * trailer (src/db/copy-binary.ts).
 *
 * Binary, not text: PostgreSQL parses every uuid, int and `uuid[]` of a text COPY (the array's
 * parser is a general one, and slow), and the worker had to write the md5 as 32 hex digits and
 * escape backslashes for it. The same 995,046 staged rows of the bench's 1M-row file A, COPYed
 * with psql into the staging table, alternating: text 24.8-31.6 s, binary 18.9-25.0 s on a busy
 * machine; into text columns without any parse 4.6 s (bench/findings/2026-11-27-binary-staging-copy.md). The
 * attributes go as text, the JSON object's, parsed by the dedupe (rowsTableDdl says why).
 */

const FIELDS = 6; // row_no, email_md5, email, attributes, brand_ids, attribute_count
const UUID_OID = 2950;

/** Rows written into a growing buffer, handed over in pieces (take). */
export class StagingBytes {
  private buf: Buffer;
  /** bytes written since the last take */
  length = 0;
  /** the 16 bytes of each brand id met: an account has few brands */
  private readonly uuids = new Map<string, Buffer>();

  constructor(private readonly capacity: number) {
    this.buf = Buffer.allocUnsafe(capacity);
  }

  header(): void {
    this.ensure(COPY_BINARY_HEADER.length);
    this.length += COPY_BINARY_HEADER.copy(this.buf, this.length);
  }

  trailer(): void {
    this.ensure(COPY_BINARY_TRAILER.length);
    this.length += COPY_BINARY_TRAILER.copy(this.buf, this.length);
  }

  row(r: StagedRow): void {
    const brands = r.brandIds?.length ?? 0;
    // UTF-8 takes at most 3 bytes per UTF-16 unit; the fixed fields and lengths take 64.
    this.ensure(64 + 3 * (r.email.length + r.attributes.length) + 20 * brands);
    const b = this.buf;
    let p = this.length;
    p = b.writeInt16BE(FIELDS, p);
    p = b.writeInt32BE(8, p);
    p = b.writeUInt32BE(Math.floor(r.rowNo / 0x100000000), p); // row numbers stay far below 2^53
    p = b.writeUInt32BE(r.rowNo >>> 0, p);
    p = b.writeInt32BE(16, p);
    b.set(r.md5, p);
    p += 16;
    const email = b.write(r.email, p + 4);
    b.writeInt32BE(email, p);
    p += 4 + email;
    // The object's text.
    const json = p;
    p += 4;
    b[p++] = 0x7b; // {
    p += b.write(r.attributes, p);
    b[p++] = 0x7d; // }
    b.writeInt32BE(p - json - 4, json);
    p = this.uuidArray(r.brandIds, p);
    p = b.writeInt32BE(2, p);
    p = b.writeInt16BE(r.attributeCount, p);
    this.length = p;
  }

  /** The bytes written so far; later writes go to a new buffer. */
  take(): Buffer {
    const out = this.buf.subarray(0, this.length);
    this.buf = Buffer.allocUnsafe(this.capacity);
    this.length = 0;
    return out;
  }

  /** A `uuid[]` of one dimension (no dimension when empty), as array_recv reads it. */
  private uuidArray(ids: readonly string[] | undefined, at: number): number {
    const b = this.buf;
    const n = ids?.length ?? 0;
    let p = b.writeInt32BE(n === 0 ? 12 : 20 + 20 * n, at);
    p = b.writeInt32BE(n === 0 ? 0 : 1, p); // dimensions
    p = b.writeInt32BE(0, p); // no nulls
    p = b.writeInt32BE(UUID_OID, p);
    if (n === 0) return p;
    p = b.writeInt32BE(n, p);
    p = b.writeInt32BE(1, p); // lower bound
    for (const id of ids!) {
      p = b.writeInt32BE(16, p);
      p += this.uuidBytes(id).copy(b, p);
    }
    return p;
  }

  private uuidBytes(id: string): Buffer {
    let bytes = this.uuids.get(id);
    if (bytes === undefined) this.uuids.set(id, (bytes = Buffer.from(id.replaceAll('-', ''), 'hex')));
    return bytes;
  }

  private ensure(bytes: number): void {
    if (this.length + bytes <= this.buf.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.length + bytes));
    this.buf.copy(grown, 0, 0, this.length);
    this.buf = grown;
  }
}
