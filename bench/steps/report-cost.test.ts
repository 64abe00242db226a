// The report step's own pieces, without a database: the clean file is file A's normal rows line for
// line, and the report count says exactly what each line's reason adds to each counter.
import { afterAll, describe, expect, test } from 'bun:test';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { COLUMNS, rowAt } from '../lib/dataset';
import { generateCsv } from '../lib/generate';
import { cleanFile, countReport } from './report-cost';

const dir = join(tmpdir(), `bench-report-cost-${process.pid}`);
afterAll(() => rm(dir, { recursive: true, force: true }));

describe('the clean file', () => {
  test("holds file A's header and normal rows only, in order, and is reused while file A is the same", async () => {
    // 15,000 rows is about 2.8 MB: several 1 MB chunks, so kept runs cross chunk ends.
    const a = await generateCsv(join(dir, 'contacts-15000-a.csv'), 15_000, 0, () => {});
    const clean = await cleanFile(a, () => {});
    const want = [COLUMNS.join(',')];
    for (let i = 0; i < a.rows; i++) if (rowAt(i, 0).kind === 'normal') want.push(rowAt(i, 0).cells.join(','));
    expect(await Bun.file(clean.path).text()).toBe(`${want.join('\n')}\n`);
    expect(clean).toMatchObject({ rows: a.normal, normal: a.normal, duplicates: 0, malformed: 0 });
    expect(clean.bytes).toBe(Bun.file(clean.path).size);
    const logged: string[] = [];
    expect(await cleanFile(a, (m) => logged.push(m))).toEqual(clean);
    expect(logged[0]).toMatch(/reusing/);
  });
});

const stream = (text: string, size: number) => {
  const bytes = new TextEncoder().encode(text);
  return new ReadableStream<Uint8Array>({
    start(c) {
      for (let k = 0; k < bytes.length; k += size) c.enqueue(bytes.subarray(k, k + size));
      c.close();
    },
  });
};

describe('countReport', () => {
  const report =
    'row,reason,column,detail,Email,Brand\n' +
    '3,invalid_email,Email,The Email cell is not a valid email address.,x,\n' +
    '5,duplicate_in_file,,"Row 9 has the same email address, and was imported instead.",é@example.com,\n' +
    '7,unchanged,,The row would change nothing on the existing contact.,a@example.com,"Brand 1;Brand 2"\n' +
    '8,unknown_brand,Brand,The Brand cell names a brand.,b@example.com,Nope\n';

  test('counts lines per reason and per counter, whatever the chunks', async () => {
    for (const size of [1, 7, 4096]) {
      const got = await countReport(stream(report, size), 'test');
      expect(got.lines).toBe(4);
      expect(got.perCounter).toEqual({ malformed: 2, duplicateInFile: 1, skipped: 1 });
      expect(got.perReason).toEqual({ invalid_email: 1, unknown_brand: 1, duplicate_in_file: 1, unchanged: 1 });
    }
  });

  test('a line without a known reason, a wrong header or an empty body throws', async () => {
    const bad = `${report}9,no_such_reason,,x,y,z\n`;
    await expect(countReport(stream(bad, 64), 'test')).rejects.toThrow(/report line 5 is "9,no_such_reason/);
    await expect(countReport(stream('Email,Brand\n', 64), 'test')).rejects.toThrow(/starts with "Email,Brand"/);
    await expect(countReport(stream('', 64), 'test')).rejects.toThrow(/empty/);
  });
});
