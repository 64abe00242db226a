// A lean run's generated files: deleted after a step reads them, the same bytes again before the next.
import { afterAll, expect, test } from 'bun:test';
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RunFiles } from './files';
import { generateCsv } from './generate';

const dir = join(tmpdir(), `bench-files-${process.pid}`);
afterAll(() => rm(dir, { recursive: true, force: true }));

test('lean: a file read is deleted with its meta, and made again byte for byte when a step needs it', async () => {
  const a = await generateCsv(join(dir, 'contacts-3000-a.csv'), 3000, 0, () => {});
  const text = await Bun.file(a.path).text();
  const logged: string[] = [];
  const files = new RunFiles(true, [a], (m) => logged.push(m));
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
  await new RunFiles(false, [a], () => {}).read(a);
  expect(existsSync(a.path)).toBe(true);
  const derived = { ...a, path: join(dir, 'derived.csv') };
  await Bun.write(derived.path, 'x');
  const lean = new RunFiles(true, [a], () => {});
  await lean.read(derived);
  await lean.ready(derived);
  expect(await Bun.file(derived.path).text()).toBe('x');
});
