// The bench's disk check: what it asks for (the wide shape's run, the narrow shape's and the 1M runs
// beside it), and that it stops a run that cannot fit.
import { afterAll, expect, test } from 'bun:test';
import { mkdir, rm, statfs, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { checkDiskSpace, keptFiles, neededBytes, walOnDisk } from './disk';
import { diskPlan, shapePaths } from './run-plan';

const dir = join(tmpdir(), `bench-disk-${process.pid}`);
afterAll(() => rm(dir, { recursive: true, force: true }));

test('the peak: 12 × the file and WAL with import B, 7.5 × with A alone, + files to generate unless lean', async () => {
  await mkdir(dir, { recursive: true });
  const a = join(dir, 'a.csv');
  const b = join(dir, 'b.csv');
  await writeFile(a, 'cached');
  const rows = 25_000_000;
  const file = rows * 200;
  // Also for the default steps: the dba step runs in its own database, dropped after it, and the mixed
  // step drops the imports' contacts before its own, so neither adds to import B's peak.
  expect(neededBytes({ dataDir: dir, rows, files: [a, b], importA: true, importB: true })).toBe(file + 12 * file + 8e9);
  expect(neededBytes({ dataDir: dir, rows, files: [a], importA: true, importB: false })).toBe(7.5 * file + 8e9);
  // WAL segments an earlier run left in pg_wal are recycled, not added to.
  expect(neededBytes({ dataDir: dir, rows, files: [a], importA: true, importB: false, walOnDisk: 3e9 })).toBe(
    7.5 * file + 5e9,
  );
  expect(neededBytes({ dataDir: dir, rows, files: [a], importA: true, importB: false, walOnDisk: 9e9 })).toBe(
    7.5 * file,
  );
  // A small run writes less WAL than max_wal_size lets it keep.
  expect(neededBytes({ dataDir: dir, rows: 1_000_000, files: [a], importA: true, importB: false })).toBe(
    7.5 * 200e6 + 700e6,
  );
  expect(neededBytes({ dataDir: dir, rows, files: [a], importA: false, importB: false })).toBe(0);
  // A second import of A into another account (gzip, report, fair after A) adds contacts, not versions.
  expect(neededBytes({ dataDir: dir, rows, files: [a], importA: true, importB: false, secondImport: true })).toBe(
    13 * file + 8e9,
  );
  // After import B, a second import of A lands on A's contacts grown by B's updates.
  expect(neededBytes({ dataDir: dir, rows, files: [a], importA: true, importB: true, secondImport: true })).toBe(
    15 * file + 8e9,
  );
  // Lean (each file deleted after its read): the files already on disk come back before the peak,
  // and none is generated beside it.
  expect(neededBytes({ dataDir: dir, rows, files: [a, b], importA: true, importB: true }, 'none')).toBe(
    12 * file + 8e9 - file,
  );
  // The report step's clean file is kept whatever the disk.
  const clean = join(dir, 'clean.csv');
  expect(
    neededBytes(
      { dataDir: dir, rows, files: [a], derived: [clean], importA: true, importB: false, secondImport: true },
      'none',
    ),
  ).toBe(file + 13 * file + 8e9 - file);
});

test('a run that cannot fit stops before it starts, saying how much it needs and how much is free', async () => {
  await mkdir(dir, { recursive: true });
  const logged: string[] = [];
  const huge = { dataDir: dir, rows: 1e12, files: [join(dir, 'missing.csv')], importA: true, importB: true };
  await expect(checkDiskSpace(huge, (m) => logged.push(m))).rejects.toThrow(
    /not enough disk space in .*: this run needs about [\d.]+ GB .* and [\d.]+ GB are free\. .*--rows N/,
  );
  expect(
    await checkDiskSpace({ dataDir: dir, rows: 1000, files: [], importA: false, importB: false }, (m) =>
      logged.push(m),
    ),
  ).toEqual({ lean: false, keep: 'all' });
  expect(logged.at(-1)).toMatch(/needs about 0\.0 GB free/);
});

test('files that do not all fit beside the data: the run keeps those that fit, deletes the others', async () => {
  await mkdir(dir, { recursive: true });
  const fs = await statfs(dir);
  const free = fs.bavail * fs.bsize;
  // Files of 1/12.5 of the free space: import B's peak with file B still to generate is 13 of them
  // (more than is free), lean 12 less file A already on disk, 11 (less than is free).
  const rows = Math.floor(free / 12.5 / 200);
  const a = join(dir, 'a-on-disk.csv');
  await writeFile(a, 'cached');
  const plan = {
    dataDir: dir,
    rows,
    files: [a, join(dir, 'b-missing.csv')],
    importA: true,
    importB: true,
    walBytes: 0,
  };
  expect(neededBytes(plan)).toBe(13 * rows * 200);
  expect(neededBytes(plan, 'none')).toBe(11 * rows * 200);
  // Keeping file A (on disk already) and deleting B after its read: 12, which fits.
  expect(neededBytes(plan, new Set([a]))).toBe(12 * rows * 200);
  const logged: string[] = [];
  expect(await checkDiskSpace(plan, (m) => logged.push(m))).toEqual({ lean: true, keep: new Set([a]) });
  expect(logged.at(-1)).toMatch(
    /, [\d.]+ GB with none kept; [\d.]+ GB are free: keeping a-on-disk\.csv \([\d.]+ GB\) and deleting the others/,
  );
  // --lean keeps none.
  expect(await checkDiskSpace(plan, (m) => logged.push(m), { lean: true })).toEqual({ lean: true, keep: 'none' });
  expect(logged.at(-1)).toMatch(/: deleting each after its read \(--lean\)$/);
  // A bigger file does not fit, even lean.
  await expect(checkDiskSpace({ ...plan, rows: rows * 2 }, (m) => logged.push(m))).rejects.toThrow(
    /not enough disk space/,
  );
});

test("the WAL on disk: the segments in the embedded server's pg_wal, nothing else", async () => {
  const data = join(dir, 'wal-data');
  expect(await walOnDisk(data)).toBe(0);
  await mkdir(join(data, 'postgres', 'pg_wal', 'archive_status'), { recursive: true });
  await writeFile(join(data, 'postgres', 'pg_wal', '000000010000000000000001'), Buffer.alloc(4096));
  await writeFile(join(data, 'postgres', 'pg_wal', '000000010000000000000002'), Buffer.alloc(1024));
  await writeFile(join(data, 'postgres', 'pg_wal', '00000002.history'), 'x');
  expect(await walOnDisk(data)).toBe(5120);
});

test('the narrow shape and the 1M runs are parts of their own: peaks beside the main one, files added', async () => {
  await mkdir(dir, { recursive: true });
  const rows = 25_000_000;
  const wide = rows * 200;
  const narrow = rows * 80;
  const missing = (name: string) => join(dir, `missing-${name}.csv`);
  const a = join(dir, 'a.csv');
  await writeFile(a, 'cached');
  const narrowPart = {
    shape: 'narrow' as const,
    rows,
    files: [missing('na'), missing('nb')],
    importA: true,
    importB: true,
  };
  // With import B the narrow shape peaks at 20 of its own files, below the wide one's 12.
  const plan = { dataDir: dir, rows, files: [a, missing('b')], importA: true, importB: true, others: [narrowPart] };
  expect(neededBytes(plan)).toBe(wide + 2 * narrow + 12 * wide + 8e9);
  // Lean: the file on disk comes back before the peak; the others' are made and deleted one at a time.
  expect(neededBytes(plan, 'none')).toBe(12 * wide + 8e9 - wide);
  // Alone (`--shapes narrow`), the narrow shape's peak is the run's: 20 × its file B, 12 × with A alone.
  const alone = { dataDir: dir, rows, files: [], importA: false, importB: false, others: [narrowPart] };
  expect(neededBytes(alone)).toBe(2 * narrow + 20 * narrow + 8e9);
  expect(neededBytes({ ...alone, others: [{ ...narrowPart, importB: false, files: [missing('na')] }] })).toBe(
    narrow + 12 * narrow + 8e9,
  );
  // A 1M part of a 25M run adds its files, and its peak stays below the main one.
  const small = { shape: 'wide' as const, rows: 1_000_000, files: [missing('1m-a')], importA: true, importB: false };
  expect(neededBytes({ ...plan, others: [narrowPart, small] })).toBe(200e6 + wide + 2 * narrow + 12 * wide + 8e9);
  // Only 1M rows: WAL as the largest part writes it.
  const only1M = { dataDir: dir, rows: 1000, files: [], importA: false, importB: false, others: [small] };
  expect(neededBytes(only1M)).toBe(200e6 + 7.5 * 200e6 + 700e6);
});

test("the default run at 25M rows: both shapes and their 1M runs peak at the wide import B's 12 × + WAL", () => {
  const opts = {
    rows: 25_000_000,
    steps: ['l1', 'dba', 'a', 'b', 'http', 'mixed'],
    shapes: ['wide', 'narrow'] as const,
    mixedShape: 'narrow' as const,
  };
  const files = join(dir, 'none-yet');
  const paths = shapePaths({ ...opts, shapes: [...opts.shapes], flatRows: 1_000_000, citusWorkers: 0 }, files);
  expect(paths.map((p) => [p.shape, basename(p.a), p.flat && basename(p.flat.b!)])).toEqual([
    ['narrow', 'contacts-25000000-narrow-a.csv', 'contacts-1000000-narrow-b.csv'],
    ['wide', 'contacts-25000000-a.csv', 'contacts-1000000-b.csv'],
  ]);
  const plan = diskPlan(
    { ...opts, shapes: [...opts.shapes], flatRows: 1_000_000, citusWorkers: 0 },
    paths,
    undefined,
    dir,
    0,
  );
  // The mixed step's import of the narrow file A peaks alone, the narrow shape's part holding the file.
  expect(plan.others?.map((p) => [p.shape, p.rows, p.files.length])).toEqual([
    ['narrow', 25_000_000, 2],
    ['narrow', 1_000_000, 2],
    ['wide', 1_000_000, 2],
    ['narrow', 25_000_000, 0],
  ]);
  const wide = 5e9;
  const filesToMake = 2 * wide + 2 * 2e9 + 2 * 200e6 + 2 * 80e6;
  expect(neededBytes(plan)).toBe(filesToMake + 12 * wide + 8e9);
  expect(neededBytes(plan, 'none')).toBe(12 * wide + 8e9);
  // With 75 GB free (as on the machine of bench/findings/2026-12-07-default-run-25m.md) it keeps the
  // small files and the narrow ones, and generates the wide ones again for each step that reads them.
  expect([...keptFiles(plan, 75e9)].map((p) => basename(p))).toEqual([
    'contacts-1000000-narrow-a.csv',
    'contacts-1000000-narrow-b.csv',
    'contacts-1000000-a.csv',
    'contacts-1000000-b.csv',
    'contacts-25000000-narrow-a.csv',
    'contacts-25000000-narrow-b.csv',
  ]);
  expect(neededBytes(plan, keptFiles(plan, 75e9))).toBe(12 * wide + 8e9 + 2 * 80e6 + 2 * 200e6 + 2 * 2e9);
  // On the wide file A (--mixed-shape wide) it is the wide shape's import A again, after B's contacts went.
  const onWide = diskPlan(
    { ...opts, shapes: [...opts.shapes], mixedShape: 'wide', flatRows: 1_000_000, citusWorkers: 0 },
    paths,
    undefined,
    dir,
    0,
  );
  expect(onWide.others).toHaveLength(3);
  expect(neededBytes(onWide)).toBe(neededBytes(plan));
  // --no-flat: no 1M files; at 1M rows there are none either.
  const noFlat = shapePaths({ ...opts, shapes: [...opts.shapes], flatRows: 0, citusWorkers: 0 }, files);
  expect(noFlat.every((p) => p.flat === undefined)).toBe(true);
  const small = shapePaths(
    { ...opts, rows: 1_000_000, shapes: [...opts.shapes], flatRows: 1_000_000, citusWorkers: 0 },
    files,
  );
  expect(small.every((p) => p.flat === undefined)).toBe(true);
});
