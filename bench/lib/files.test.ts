// A lean run's generated files: deleted after a step reads them, the same bytes again before the next;
// the run's files made in child processes, two at once, as the same bytes.
import { afterAll, expect, test } from 'bun:test';
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RunFiles } from './files';
import { generateCsv, generateInChild } from './generate';

const dir = join(tmpdir(), `bench-files-${process.pid}`);
afterAll(() => rm(dir, { recursive: true, force: true }));

test('lean: a file read is deleted with its meta, and made again byte for byte when a step needs it', async () => {
  const a = await generateCsv(join(dir, 'contacts-3000-a.csv'), 3000, 0, () => {});
  const text = await Bun.file(a.path).text();
  const logged: string[] = [];
  const files = new RunFiles('none', [a], (m) => logged.push(m));
  await files.read(a);
  expect(existsSync(a.path)).toBe(false);
  expect(existsSync(`${a.path}.meta.json`)).toBe(false);
  expect(logged.at(-1)).toMatch(/deleted after its read/);
  await files.ready(a);
  expect(await Bun.file(a.path).text()).toBe(text);
  // Made again with its meta, so the next run reuses it.
  expect(await generateCsv(a.path, 3000, 0, (m) => logged.push(m))).toEqual(a);
  expect(logged.at(-1)).toMatch(/reusing/);
});

test('kept: nothing is deleted; files made from the generated ones are never deleted', async () => {
  const a = await generateCsv(join(dir, 'contacts-2000-a.csv'), 2000, 0, () => {});
  await new RunFiles('all', [a], () => {}).read(a);
  expect(existsSync(a.path)).toBe(true);
  const derived = { ...a, path: join(dir, 'derived.csv') };
  await Bun.write(derived.path, 'x');
  const lean = new RunFiles('none', [a], () => {});
  await lean.read(derived);
  await lean.ready(derived);
  expect(await Bun.file(derived.path).text()).toBe('x');
});

test('partly kept: a listed file stays after its read, another is deleted and made again', async () => {
  const [a, b] = await Promise.all(
    [0, 1].map((v) => generateCsv(join(dir, `contacts-1500-${v ? 'b' : 'a'}.csv`), 1500, v, () => {})),
  );
  const files = new RunFiles(new Set([a!.path]), [a!, b!], () => {});
  await files.read(a!);
  await files.read(b!);
  expect([existsSync(a!.path), existsSync(b!.path)]).toEqual([true, false]);
  await files.ready(b!);
  expect(existsSync(b!.path)).toBe(true);
});

test('made in child processes, two at once: the same bytes and meta as in this process, then reused', async () => {
  const shapes = ['wide', 'narrow'] as const;
  const here = await Promise.all(shapes.map((s) => generateCsv(join(dir, `here-${s}.csv`), 2500, 1, () => {}, s)));
  const logged: string[] = [];
  const log = (m: string) => logged.push(m);
  const made = await Promise.all(shapes.map((s) => generateInChild(join(dir, `child-${s}.csv`), 2500, 1, log, s)));
  for (const [i, meta] of made.entries()) {
    expect({ ...meta, path: '' }).toEqual({ ...here[i]!, path: '' });
    expect(await Bun.file(meta.path).text()).toBe(await Bun.file(here[i]!.path).text());
  }
  expect(logged).toEqual([]);
  expect(await generateInChild(made[0]!.path, 2500, 1, log, 'wide')).toEqual(made[0]!);
  expect(logged.at(-1)).toMatch(/reusing/);
  // A child that fails says so: rows the generator refuses.
  await expect(generateInChild(join(dir, 'bad.csv'), 10, 0, log, 'sideways' as 'wide')).rejects.toThrow(/exited with/);
});
