/**
 * The read phase's COPY in PostgreSQL's binary format (worker/import/staging-binary.ts through
 * copy-sink.ts): every field of every staged row reads back from the real staging table as the
 * worker wrote it, across segments and statements, whatever the text.
 */
import { expect, test } from 'bun:test';
import fc from 'fast-check';
import type { StagedRow } from '../../worker/import/cells';
import { CopySink } from '../../worker/import/copy-sink';
import { accountLiteral, rowsTableDdl } from '../../worker/import/staging';
import { importBed } from '../helpers/import-bed';

const bed = importBed();

interface Back {
  row_no: string;
  md5: string;
  email: string;
  attributes: unknown;
  brand_ids: string[];
  attribute_count: number;
}

/** COPYs `rows` through a CopySink (statements of `batch` rows) and reads the table back in order. */
async function roundTrip(rows: StagedRow[], batch: number): Promise<Back[]> {
  const table = `binary_probe_${crypto.randomUUID().replaceAll('-', '')}`;
  const accountId = crypto.randomUUID();
  const conn = await bed.db.sql.reserve();
  try {
    for (const statement of rowsTableDdl(table, accountLiteral(accountId))) await conn.unsafe(statement);
    const sink = new CopySink(conn, table, batch);
    for (const r of rows) {
      sink.add(r);
      if (!sink.ready) await sink.whenReady();
    }
    await sink.flush();
    expect(sink.rows).toBe(rows.length);
    return await conn.unsafe<Back[]>(
      // The attributes as the dedupe reads them: the staged JSON text parsed (worker/import/dedupe.ts).
      `select row_no::text, replace(email_md5::text, '-', '') as md5, email, attributes::jsonb as attributes,
              brand_ids::text[] as brand_ids, attribute_count
       from ${table} where account_id = $1::uuid order by ${table}.row_no`,
      [accountId],
    );
  } finally {
    await conn.unsafe(`drop table if exists ${table}`);
    conn.release();
  }
}

const md5 = (s: string) => Bun.MD5.hash(s.toLowerCase()) as Uint8Array;
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

function expected(rows: StagedRow[]) {
  return rows.map((r) => ({
    row_no: String(r.rowNo),
    md5: hex(r.md5),
    email: r.email,
    attributes: JSON.parse(`{${r.attributes}}`),
    brand_ids: r.brandIds ?? [],
    attribute_count: r.attributeCount,
  }));
}

test('every field reads back: big row numbers, no brands, one, several; text of every kind', async () => {
  const brands = [crypto.randomUUID(), crypto.randomUUID(), crypto.randomUUID()];
  const odd = 'a "q" \\ b\tc\nd é 😀 \u0001 ∑';
  const rows: StagedRow[] = [
    { rowNo: 1, md5: md5('a@b.co'), email: 'A@b.co', attributes: '', brandIds: undefined, attributeCount: 0 },
    {
      rowNo: 2 ** 40 + 7,
      md5: md5('x@y.io'),
      email: 'x@y.io',
      attributes: `"name":${JSON.stringify(odd)},"n":-1.5e3,"ok":true,"tags":["a;b","\\\\"]`,
      brandIds: [brands[0]!],
      attributeCount: 4,
    },
    {
      rowNo: 2 ** 52,
      md5: md5('z@y.io'),
      email: 'z@y.io',
      attributes: `"long":${JSON.stringify('é'.repeat(255))}`,
      brandIds: brands,
      attributeCount: 1,
    },
  ];
  expect(await roundTrip(rows, 2)).toEqual(expected(rows));
});

test('many rows: segments, statements and a row bigger than a segment', async () => {
  const rows: StagedRow[] = Array.from({ length: 3_000 }, (_, i) => ({
    rowNo: i + 1,
    md5: md5(`p${i}@example.com`),
    email: `p${i}@example.com`,
    // Row 1,500 alone is ~120 KB: the writer's buffer grows for it.
    attributes: i === 1_499 ? `"big":${JSON.stringify('😀'.repeat(30_000))}` : `"i":${i},"s":"${'x'.repeat(i % 200)}"`,
    brandIds: i % 3 === 0 ? undefined : [crypto.randomUUID()],
    attributeCount: i === 1_499 ? 1 : 2,
  }));
  expect(await roundTrip(rows, 1_000)).toEqual(expected(rows));
});

test('any text and any JSON value survive the binary COPY', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(
        fc.record({
          email: fc.string({ minLength: 1, maxLength: 60, unit: 'grapheme' }).filter((s) => !s.includes('\0')),
          value: fc.jsonValue({ maxDepth: 2 }).filter((v) => !JSON.stringify(v).includes('\\u0000')),
        }),
        { minLength: 1, maxLength: 40 },
      ),
      async (items) => {
        const rows: StagedRow[] = items.map((it, i) => ({
          rowNo: i + 1,
          md5: md5(it.email),
          email: it.email,
          attributes: `"v":${JSON.stringify(it.value)}`,
          brandIds: undefined,
          attributeCount: 1,
        }));
        const back = await roundTrip(rows, 7);
        expect(back.map((b) => [b.email, b.md5])).toEqual(rows.map((r) => [r.email, hex(r.md5)]));
        // jsonb keeps values, not spelling: compare parsed (numbers through JSON's own round trip).
        expect(back.map((b) => b.attributes)).toEqual(rows.map((r) => JSON.parse(`{${r.attributes}}`)));
      },
    ),
    { numRuns: 30 },
  );
});
