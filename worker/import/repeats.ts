import type { Sql } from '../../src/db';
import { InsertQueue } from './insert-queue';
import { FLUSH_ROWS } from './rejects';
import { STAGING_STORAGE } from './staging';

/** Bits set per email; with ~13 bits per email (expectedRows' margin) about 0.5-1% false repeats. */
const HASHES = 4;
/** A block is one 64-byte cache line: 16 words, 512 bits. */
const BLOCK_WORDS = 16;
const MIN_BITS = 1 << 20;
/** 32 MB: about 1% false repeats at 25M rows. The filter's size never grows with the file. */
const MAX_BITS = 1 << 28;

/**
 * Which emails of the file the read phase may have seen before: a Bloom filter over the emails'
 * md5, and the md5 of each row it says was seen already, written to the import's repeats table.
 * Every email that occurs twice is there (a Bloom filter has no false negatives), with about 1%
 * of the others; recordDuplicates (worker/import/rejects.ts) then finds the duplicate rows with
 * one scan of the staged rows against that small set, instead of a second sort of all of them.
 *
 * Blocked: an email's bits all lie in one 512-bit block, one cache line. With the bits spread over
 * the whole array, each row cost four cache misses on the read's thread, whose parsing keeps the
 * caches full: 0.3-0.4 s per 1M rows in the pipeline (10% of the read's CPU), against 0.04 s when
 * timed alone. A blocked filter needs a little more room for the same false hits, which the
 * sizing's margin gives.
 *
 * Memory is the filter alone, about 13 bits per expected row (expectedRows), up to 32 MB.
 */
export class RepeatFilter {
  private readonly bits: Uint32Array;
  /** blocks - 1 (a power of two) */
  private readonly blockMask: number;
  private pending: string[] = [];
  /** its inserts, running behind the read (the reader pauses while it is not `ready`) */
  readonly queue: InsertQueue;
  /** md5s written to the repeats table so far */
  count = 0;
  /** the bit array's size */
  readonly bytes: number;

  constructor(
    sql: Sql,
    private readonly table: string,
    private readonly accountId: string,
    expectedRows: number,
  ) {
    let size = MIN_BITS;
    while (size < MAX_BITS && size < expectedRows * 10) size *= 2;
    this.bits = new Uint32Array(size / 32);
    this.bytes = size / 8;
    this.blockMask = size / 32 / BLOCK_WORDS - 1;
    this.queue = new InsertQueue(sql);
  }

  /** Notes the row's email (its md5's 16 bytes, copied if it is a repeat). */
  add(md5: Uint8Array): void {
    // The md5 is uniform already: 32 bits of it choose the block, 36 more the four bits in it.
    const base = (word32(md5, 0) & this.blockMask) * BLOCK_WORDS;
    const h2 = word32(md5, 4);
    const h3 = word32(md5, 8);
    const bits = this.bits;
    let seen = true;
    for (let i = 0; i < HASHES; i++) {
      const bit = (i < 3 ? h2 >>> (9 * i) : h3) & 511;
      const word = base + (bit >>> 5);
      const flag = 1 << (bit & 31);
      if ((bits[word]! & flag) === 0) {
        seen = false;
        bits[word] = bits[word]! | flag;
      }
    }
    if (!seen) return;
    this.pending.push(Buffer.from(md5).toString('hex'));
    if (this.pending.length >= FLUSH_ROWS) this.flush();
  }

  async close(): Promise<void> {
    this.flush();
    await this.queue.close();
  }

  private flush(): void {
    if (this.pending.length === 0) return;
    this.count += this.pending.length;
    this.queue.push(`insert into ${this.table} (account_id, email_md5) select $1::uuid, unnest($2::uuid[])`, [
      this.accountId,
      this.pending,
    ]);
    this.pending = [];
  }
}

/**
 * How many rows a file holds, from the rows and characters parsed so far (the first chunk: a
 * file's rows are alike in size) and the object's size. Overestimated on purpose, never under
 * (fewer bits per row than planned raise the false repeats steeply): characters count as bytes
 * (a multi-byte character makes it higher), a gzip object is taken to hold 10 times its size
 * (CSV compresses 4-8 times), and a quarter more on top. Object size / 40, the estimate before
 * this, was 4.7 times too high for a typical contacts file (190 bytes a row): its filter reached
 * the 32 MB cap from 3M rows on, and the worker's heap with it (heap-guard.ts).
 */
export function expectedRows(objectSize: number, gzip: boolean, rows: number, chars: number): number {
  const fileChars = objectSize * (gzip ? 10 : 1);
  return (1.25 * fileChars * rows) / Math.max(chars, 1);
}

/** The big-endian 32-bit number of bytes `at`…`at + 3` (the first 8 hex digits from `2 × at`). */
function word32(b: Uint8Array, at: number): number {
  return ((b[at]! << 24) | (b[at + 1]! << 16) | (b[at + 2]! << 8) | b[at + 3]!) >>> 0;
}

/** DDL of the repeats table: UNLOGGED like the staged rows it points into, and rebuilt with them. */
export function repeatsTableDdl(table: string): string {
  return `create unlogged table if not exists ${table} (account_id uuid not null, email_md5 uuid not null)
    ${STAGING_STORAGE}`;
}
