// The benchmark's verdicts rest on its row models (the wide shape's and the narrow one's): these
// checks keep the generator and the models honest, and the models true to what the import reads
// (worker/import/cells.ts). No database needed; a 30,000-row file takes well under a second.
import { afterAll, describe, expect, test } from 'bun:test';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Papa from 'papaparse';
import { BrandIndex, RowReader } from '../../worker/import/cells';
import { COLUMNS, dupTarget, kindOf, lastRowFor, md5Hex, rowAt, sampleNormalRows } from './dataset';
import { generateCsv } from './generate';
import { narrowDupTarget } from './narrow';
import { SHAPES } from './shapes';

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

describe('the narrow shape', () => {
  const narrow = SHAPES.narrow;
  const parsedNarrow = async (variant: number) => {
    const meta = await generateCsv(join(dir, `n-${variant}.csv`), ROWS, variant, () => {}, 'narrow');
    const { data, errors } = Papa.parse<string[]>(await Bun.file(meta.path).text(), { skipEmptyLines: true });
    return { meta, header: data[0]!, rows: data.slice(1), errors };
  };

  test('6 columns in every row, no Brand; about 75 bytes a row; counts match the meta and the model', async () => {
    const { meta, header, rows, errors } = await parsedNarrow(0);
    expect(errors).toEqual([]);
    expect(header).toEqual(['Email', 'nickname', 'backup_email', 'visits', 'active', 'labels']);
    expect(meta.shape).toBe('narrow');
    expect(rows.length).toBe(ROWS);
    expect(rows.every((r) => r.length === 6)).toBe(true);
    // An email is a character longer at 1M rows (73.5 bytes a row there) and at 25M (~74.5).
    expect(meta.bytes / ROWS).toBeGreaterThan(68);
    expect(meta.bytes / ROWS).toBeLessThan(78);
    const kinds = { normal: 0, duplicate: 0, malformed: 0 };
    for (let i = 0; i < ROWS; i++) kinds[narrow.kindOf(i)]++;
    expect(meta).toMatchObject({ normal: kinds.normal, duplicates: kinds.duplicate, malformed: kinds.malformed });
    expect(rows.map((r) => r.join(','))).toEqual(
      Array.from({ length: ROWS }, (_, i) => narrow.rowAt(i, 0).cells.join(',')),
    );
  });

  test('every 200th row repeats an earlier address in upper case; 0.5 % malformed, never with a good email', () => {
    let malformed = 0;
    for (let i = 0; i < ROWS; i++) {
      const kind = narrow.kindOf(i);
      expect(kind === 'duplicate').toBe(i % 200 === 199);
      if (kind === 'duplicate') {
        const target = narrowDupTarget(i);
        expect(narrow.kindOf(target)).toBe('normal');
        expect(target).toBeLessThan(i);
        expect(narrow.rowAt(i, 0).email).toBe(narrow.rowAt(target, 0).email.toUpperCase());
      }
      if (kind === 'malformed') {
        malformed++;
        expect(narrow.rowAt(i, 0).email).toBe('');
      }
    }
    expect(malformed / ROWS).toBeGreaterThan(0.003);
    expect(malformed / ROWS).toBeLessThan(0.007);
  });

  test('1 address in 8 with capitals; cells of every attribute empty; booleans in every spelling', async () => {
    const { rows } = await parsedNarrow(0);
    const normal = rows.filter((_, i) => narrow.kindOf(i) === 'normal');
    const capitals = normal.filter((r) => r[0] !== r[0]!.toLowerCase()).length / normal.length;
    expect(capitals).toBeGreaterThan(0.11);
    expect(capitals).toBeLessThan(0.14);
    for (let c = 1; c < 6; c++) {
      if (c === 3) continue; // visits is always sent
      expect(normal.some((r) => r[c] === '')).toBe(true);
    }
    const spellings = new Set(normal.map((r) => r[4]).filter(Boolean));
    const words = ['true', 'false', 'yes', 'no'];
    const want = [
      ...words,
      ...words.map((w) => w.toUpperCase()),
      ...words.map((w) => w[0]!.toUpperCase() + w.slice(1)),
    ];
    expect([...spellings].sort()).toEqual([...want, '1', '0'].sort());
  });

  test('good rows hold `normal` distinct emails once lowercased; the last row per email is lastRowFor', async () => {
    const { meta, rows } = await parsedNarrow(0);
    const last = new Map<string, number>();
    rows.forEach((r, i) => {
      if (narrow.kindOf(i) !== 'malformed') last.set(md5Hex(r[0]!), i);
    });
    expect(last.size).toBe(meta.normal);
    for (const j of narrow.sampleNormalRows(ROWS, 500))
      expect(last.get(md5Hex(narrow.rowAt(j, 0).email))).toBe(narrow.lastRowFor(j, ROWS));
  });

  test('variant B keeps emails and row kinds, leaves no cell empty and changes every value A stored', async () => {
    const { meta, rows } = await parsedNarrow(1);
    expect(meta).toMatchObject({ normal: (await parsedNarrow(0)).meta.normal });
    expect(rows.every((r, i) => narrow.kindOf(i) === 'malformed' || r.every((cell) => cell !== ''))).toBe(true);
    for (const i of narrow.sampleNormalRows(ROWS, 300)) {
      const a = narrow.rowAt(i, 0);
      const b = narrow.rowAt(i, 1);
      expect(b.email).toBe(a.email);
      for (const [k, v] of Object.entries(a.attributes))
        expect(JSON.stringify(b.attributes[k])).not.toBe(JSON.stringify(v));
    }
  });
});

describe('every shape: the import reads each row as the model says', () => {
  for (const shape of Object.values(SHAPES))
    for (const variant of [0, 1])
      test(`${shape.name} ${variant ? 'B' : 'A'}: malformed rows refused, good rows read as their model`, async () => {
        const meta = await generateCsv(
          join(dir, `read-${shape.name}-${variant}.csv`),
          5000,
          variant,
          () => {},
          shape.name,
        );
        const { data } = Papa.parse<string[]>(await Bun.file(meta.path).text(), { skipEmptyLines: true });
        const types = new Map(shape.attributes.map((a) => [a.name, a.type]));
        const columns = shape.columns.map((name) => ({
          name,
          type: name === 'Email' ? ('identity' as const) : name === 'Brand' ? ('brand' as const) : types.get(name)!,
        }));
        const brandIds = shape.brands.map((_, b) => `00000000-0000-0000-0000-00000000000${b}`);
        const reader = new RowReader(
          columns,
          new BrandIndex(shape.brands.map((name, b) => ({ id: brandIds[b]!, name }))),
          [],
        );
        data.slice(1).forEach((cells, i) => {
          const row = shape.rowAt(i, variant);
          const staged = reader.read(i, cells);
          expect(staged === undefined).toBe(row.kind === 'malformed');
          if (staged === undefined) return;
          expect({
            md5: Buffer.from(staged.md5).toString('hex'),
            email: staged.email,
            attributes: JSON.parse(`{${staged.attributes}}`),
            brands: staged.brandIds ?? [],
          }).toEqual({
            md5: md5Hex(row.email),
            email: row.email.trim(),
            attributes: row.attributes,
            brands: row.brands.map((b) => brandIds[b]!),
          });
        });
      });
});
