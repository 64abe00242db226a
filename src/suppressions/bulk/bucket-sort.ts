import { mkdtemp, open, rm, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';

const BUCKETS = 256;
const WRITE_BUFFER = 64 * 1024;
const OUT_CHUNK = 1 << 20;
// Records of a bucket sort natively as float64 keys: 32 bits of the record, 21 bits of its index.
const INDEX_BITS = 2 ** 21;

/**
 * Sorts and de-duplicates fixed-length binary records (hash digests) with memory bounded by one
 * bucket rather than the file: records are spread over 256 temp files by their first byte, then
 * each file is read, sorted and emitted in turn. Digests are uniform, so a bucket holds about
 * 1/256 of the records (625 KB for 10M md5 records). Sorting here, beside the database, replaces
 * PostgreSQL's sort of the whole file and lets the records go into an empty list by COPY.
 */
export class BucketSort {
  /** Records added, and distinct records emitted by sorted(). */
  added = 0;
  distinct = 0;
  private readonly buffers = Array.from({ length: BUCKETS }, () => Buffer.allocUnsafe(WRITE_BUFFER));
  private readonly fill = new Int32Array(BUCKETS);
  private readonly sizes = new Float64Array(BUCKETS);

  private constructor(
    readonly recordLength: number,
    private readonly dir: string,
    private readonly files: FileHandle[],
  ) {}

  /** Temp files go under `parent` (the OS temp dir by default): about the size of the records. */
  static async open(recordLength: number, parent = tmpdir()): Promise<BucketSort> {
    if (recordLength < 5) throw new Error('BucketSort needs records of at least 5 bytes');
    const dir = await mkdtemp(join(parent, 'suppression-import-'));
    const files: FileHandle[] = [];
    try {
      for (let b = 0; b < BUCKETS; b++) files.push(await open(join(dir, b.toString(16)), 'w+'));
      return new BucketSort(recordLength, dir, files);
    } catch (error) {
      await Promise.allSettled(files.map((f) => f.close()));
      await rm(dir, { recursive: true, force: true });
      throw error;
    }
  }

  /** A pipeline sink for binary COPY tuples of one field of recordLength bytes (recordRows). */
  writable(): Writable {
    return new Writable({
      write: (chunk: Buffer, _encoding, done) => void this.addTuples(chunk).then(() => done(), done),
      final: (done) => void this.flushAll().then(() => done(), done),
    });
  }

  private async addTuples(chunk: Buffer): Promise<void> {
    const len = this.recordLength;
    const writes: Promise<unknown>[] = [];
    for (let o = 0; o < chunk.length; o += 6 + len) {
      if (chunk.readInt32BE(o + 2) !== len)
        throw new Error(`BucketSort: a record of ${chunk.readInt32BE(o + 2)} bytes, expected ${len}`);
      const v = o + 6;
      const b = chunk[v]!;
      if (this.fill[b]! + len > WRITE_BUFFER) writes.push(this.flush(b));
      const buf = this.buffers[b]!;
      const f = this.fill[b]!;
      for (let j = 0; j < len; j++) buf[f + j] = chunk[v + j]!;
      this.fill[b] = f + len;
      this.added++;
    }
    await Promise.all(writes);
  }

  /** Writes a bucket's buffer at the end of its file (positioned writes: no ordering needed). */
  private flush(b: number): Promise<unknown> {
    const buf = this.buffers[b]!;
    const length = this.fill[b]!;
    const position = this.sizes[b]!;
    this.buffers[b] = Buffer.allocUnsafe(WRITE_BUFFER);
    this.fill[b] = 0;
    this.sizes[b] = position + length;
    return this.files[b]!.write(buf, 0, length, position);
  }

  private async flushAll(): Promise<void> {
    const writes: Promise<unknown>[] = [];
    for (let b = 0; b < BUCKETS; b++) if (this.fill[b]! > 0) writes.push(this.flush(b));
    await Promise.all(writes);
  }

  /**
   * The distinct records in ascending byte order, in chunks, each record preceded by `prefix`
   * (say, the framing of a binary COPY tuple). Copies are byte loops: a native call per record
   * cost more than the sort.
   */
  async *sorted(prefix: Buffer = Buffer.alloc(0)): AsyncGenerator<Buffer> {
    const len = this.recordLength;
    const step = prefix.length + len;
    const perChunk = Math.max(1, Math.floor(OUT_CHUNK / step));
    for (let b = 0; b < BUCKETS; b++) {
      const size = this.sizes[b]!;
      if (size === 0) continue;
      const data = Buffer.allocUnsafe(size);
      for (let at = 0; at < size;) {
        const { bytesRead } = await this.files[b]!.read(data, at, size - at, at);
        if (bytesRead === 0) throw new Error(`BucketSort: bucket ${b} is shorter than written`);
        at += bytesRead;
      }
      const order = sortedOrder(data, len);
      let out = Buffer.allocUnsafe(Math.min(order.length, perChunk) * step);
      let o = 0;
      let prev = -1;
      for (let k = 0; k < order.length; k++) {
        const at = order[k]! * len;
        if (prev >= 0 && sameRecord(data, prev, at, len)) continue;
        if (o + step > out.length) {
          yield out;
          out = Buffer.allocUnsafe(Math.min(order.length - k, perChunk) * step);
          o = 0;
        }
        for (let j = 0; j < prefix.length; j++) out[o++] = prefix[j]!;
        for (let j = 0; j < len; j++) out[o++] = data[at + j]!;
        prev = at;
        this.distinct++;
      }
      if (o > 0) yield out.subarray(0, o);
    }
  }

  /** Closes and removes the temp files; safe to call more than once. */
  async close(): Promise<void> {
    await Promise.allSettled(this.files.map((f) => f.close()));
    await rm(this.dir, { recursive: true, force: true });
  }
}

function sameRecord(data: Buffer, a: number, b: number, len: number): boolean {
  for (let j = 0; j < len; j++) if (data[a + j] !== data[b + j]) return false;
  return true;
}

/** Record indexes of `data` in ascending byte order of the records. */
function sortedOrder(data: Buffer, len: number): Uint32Array {
  const n = data.length / len;
  const order = new Uint32Array(n);
  const byBytes = (x: number, y: number) => data.compare(data, y * len, y * len + len, x * len, x * len + len);
  if (n >= INDEX_BITS) {
    // Only a file skewed far from hash-like values gets here: a plain comparison sort.
    for (let i = 0; i < n; i++) order[i] = i;
    return order.sort(byBytes);
  }
  // Byte 0 is the bucket; bytes 1-4 as a number, times 2^21, plus the index: a native sort of
  // exact float64 keys, with only the (rare) runs of equal 32-bit prefixes compared in full.
  const keys = new Float64Array(n);
  for (let i = 0; i < n; i++) keys[i] = data.readUInt32BE(i * len + 1) * INDEX_BITS + i;
  keys.sort();
  for (let i = 0; i < n; i++) order[i] = keys[i]! % INDEX_BITS;
  for (let i = 0; i < n;) {
    const prefix = Math.floor(keys[i]! / INDEX_BITS);
    let j = i + 1;
    while (j < n && Math.floor(keys[j]! / INDEX_BITS) === prefix) j++;
    if (j - i > 1) order.subarray(i, j).sort(byBytes);
    i = j;
  }
  return order;
}
