/**
 * The read phase's repeats filter (worker/import/repeats.ts): every email seen a second time reaches
 * the repeats table (a Bloom filter has no false negatives, and the duplicate rows of the report are
 * looked for among those only), and the emails seen once reach it rarely (its false hits cost the
 * dedupe's scan). Against a real repeats table, as the read phase fills it.
 */
import { expect, test } from 'bun:test';
import fc from 'fast-check';
import { expectedRows, RepeatFilter, repeatsTableDdl } from '../../worker/import/repeats';
import { importBed } from '../helpers/import-bed';

const bed = importBed();
const md5 = (s: string) => Bun.MD5.hash(s, 'hex') as string;
const md5Bytes = (s: string) => Bun.MD5.hash(s) as Uint8Array;

async function repeatsOf(table: string, emails: string[], expected: number): Promise<Set<string>> {
  const sql = bed.db.sql;
  await sql.unsafe(`drop table if exists ${table}`);
  await sql.unsafe(repeatsTableDdl(table));
  const filter = new RepeatFilter(sql, table, crypto.randomUUID(), expected);
  for (const e of emails) filter.add(md5Bytes(e));
  await filter.close();
  const rows = await sql.unsafe<{ m: string }[]>(`select replace(email_md5::text, '-', '') as m from ${table}`);
  expect(rows.length).toBe(filter.count);
  return new Set(rows.map((r) => r.m));
}

test('every email added again is a repeat; of 200,000 emails seen once, under 1% are', async () => {
  const once = Array.from({ length: 200_000 }, (_, i) => `person${i}@example.com`);
  const again = once.filter((_, i) => i % 37 === 0);
  const found = await repeatsOf('repeats_probe_a', [...once, ...again], expectedRows(200_000 * 30, false, 1, 30));
  for (const e of again) expect(found.has(md5(e))).toBe(true);
  const repeated = new Set(again.map(md5));
  const falseHits = [...found].filter((m) => !repeated.has(m)).length;
  expect(falseHits).toBeLessThan(2_000);
});

test('no false negatives, whatever the emails, the repeats and the filter size', async () => {
  let run = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.uniqueArray(fc.emailAddress(), { minLength: 1, maxLength: 300 }),
      fc.array(fc.nat(), { maxLength: 50 }),
      fc.integer({ min: 1, max: 1_000_000 }),
      async (emails, picks, expected) => {
        const again = picks.map((k) => emails[k % emails.length]!);
        const found = await repeatsOf(`repeats_probe_p${run++ % 4}`, [...emails, ...again], expected);
        for (const e of again) expect(found.has(md5(e))).toBe(true);
      },
    ),
    { numRuns: 40 },
  );
});

test('expectedRows overestimates from the first chunk: characters per row, ten times a gzip object', () => {
  // A 190-byte-row file of 1 GB: about 5.3M rows, estimated 1.25 times that.
  expect(expectedRows(1e9, false, 1000, 190_000)).toBeCloseTo((1.25 * 1e9) / 190, -3);
  expect(expectedRows(1e8, true, 1000, 190_000)).toBeCloseTo((1.25 * 1e9) / 190, -3);
  expect(expectedRows(1000, false, 0, 0)).toBe(0);
});
