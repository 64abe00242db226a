// The benchmark's verdicts rest on its row model: these checks keep the generator and the model
// honest (no database needed; a 30,000-row file takes well under a second).
import { afterAll, describe, expect, test } from 'bun:test';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Papa from 'papaparse';
import { COLUMNS, dupTarget, kindOf, lastRowFor, md5Hex, rowAt, sampleNormalRows } from './dataset';
import { generateCsv } from './generate';

const ROWS = 30_000;
const dir = join(tmpdir(), `bench-dataset-${process.pid}`);
afterAll(() => rm(dir, { recursive: true, force: true }));

async function parsed(variant: number) {
  const meta = await generateCsv(join(dir, `c-${variant}.csv`), ROWS, variant, () => {});
  const { data, errors } = Papa.parse<string[]>(await Bun.file(meta.path).text(), { skipEmptyLines: true });
  return { meta, header: data[0]!, rows: data.slice(1), errors };
}

describe('bench dataset', () => {
  test('every row has every column, so COPY csv can load the file; counts match the meta', async () => {
    const { meta, header, rows, errors } = await parsed(0);
    expect(errors).toEqual([]);
    expect(header).toEqual(COLUMNS);
    expect(rows.length).toBe(ROWS);
    expect(rows.every((r) => r.length === COLUMNS.length)).toBe(true);
    expect(meta.normal + meta.duplicates + meta.malformed).toBe(ROWS);
    expect(meta.duplicates / ROWS).toBeGreaterThan(0.005);
    expect(meta.malformed / ROWS).toBeGreaterThan(0.002);
  });

  test('good rows hold exactly `normal` distinct emails, and the last row per email is lastRowFor', async () => {
    const { meta, rows } = await parsed(0);
    const last = new Map<string, number>();
    rows.forEach((r, i) => {
      if (kindOf(i) !== 'malformed') last.set(md5Hex(r[0]!), i);
    });
    expect(last.size).toBe(meta.normal);
    for (const j of sampleNormalRows(ROWS, 500)) expect(last.get(md5Hex(rowAt(j, 0).email))).toBe(lastRowFor(j, ROWS));
  });

  test('duplicates point at normal rows; malformed rows never carry a good email', () => {
    for (let i = 0; i < ROWS; i++) {
      if (kindOf(i) === 'duplicate') expect(kindOf(dupTarget(i))).toBe('normal');
      if (kindOf(i) === 'malformed') expect(rowAt(i, 0).email).toBe('');
    }
  });

  test('variant B keeps emails and row kinds but changes every value A stored', () => {
    for (const i of sampleNormalRows(ROWS, 300)) {
      const a = rowAt(i, 0);
      const b = rowAt(i, 1);
      expect(b.email).toBe(a.email);
      for (const [k, v] of Object.entries(a.attributes))
        expect(JSON.stringify(b.attributes[k])).not.toBe(JSON.stringify(v));
    }
  });
});
