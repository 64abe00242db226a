// The bench's disk check: what it asks for, and that it stops a run that cannot fit.
import { afterAll, expect, test } from 'bun:test';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkDiskSpace, neededBytes } from './disk';

const dir = join(tmpdir(), `bench-disk-${process.pid}`);
afterAll(() => rm(dir, { recursive: true, force: true }));

test('the peak: 15 × the file and the WAL with import B, 7.5 × with A alone, plus the files to generate', async () => {
  await mkdir(dir, { recursive: true });
  const a = join(dir, 'a.csv');
  const b = join(dir, 'b.csv');
  await writeFile(a, 'cached');
  const rows = 25_000_000;
  const file = rows * 200;
  expect(neededBytes({ dataDir: dir, rows, files: [a, b], importA: true, importB: true })).toBe(file + 15 * file + 8e9);
  expect(neededBytes({ dataDir: dir, rows, files: [a], importA: true, importB: false })).toBe(7.5 * file + 8e9);
  // A small run writes less WAL than max_wal_size lets it keep.
  expect(neededBytes({ dataDir: dir, rows: 1_000_000, files: [a], importA: true, importB: false })).toBe(
    7.5 * 200e6 + 700e6,
  );
  expect(neededBytes({ dataDir: dir, rows, files: [a], importA: false, importB: false })).toBe(0);
  // A second import of A into another account (gzip, report, fair, mixed after A) adds contacts, not versions.
  expect(neededBytes({ dataDir: dir, rows, files: [a], importA: true, importB: false, secondImport: true })).toBe(
    13 * file + 8e9,
  );
  // The default steps: dba before the imports and mixed after them, each 5 × the file more.
  expect(neededBytes({ dataDir: dir, rows, files: [a, b], importA: true, importB: true, dba: true, mixed: true })).toBe(
    file + 25 * file + 8e9,
  );
  expect(neededBytes({ dataDir: dir, rows, files: [a], importA: true, importB: true, dba: false, mixed: true })).toBe(
    20 * file + 8e9,
  );
});

test('a run that cannot fit stops before it starts, saying how much it needs and how much is free', async () => {
  await mkdir(dir, { recursive: true });
  const logged: string[] = [];
  const huge = { dataDir: dir, rows: 1e12, files: [join(dir, 'missing.csv')], importA: true, importB: true };
  await expect(checkDiskSpace(huge, (m) => logged.push(m))).rejects.toThrow(
    /not enough disk space in .*: this run needs about [\d.]+ GB .* and [\d.]+ GB are free\. .*--rows N/,
  );
  await checkDiskSpace({ dataDir: dir, rows: 1000, files: [], importA: false, importB: false }, (m) => logged.push(m));
  expect(logged.at(-1)).toMatch(/needs about 0\.0 GB free/);
});
