// The peer steps' progress for the run's line: their files' rows as each one's upsert commits.
import { afterEach, expect, test } from 'bun:test';
import { onProgress } from '../lib/format';
import type { FileMeta } from '../lib/generate';
import { filesProgress } from './shape-steps';

const file = (rows: number, variant: number): FileMeta => ({
  version: 6,
  path: `/files/contacts-${rows}-${variant ? 'b' : 'a'}.csv`,
  shape: 'narrow',
  rows,
  variant,
  bytes: rows * 80,
  normal: rows,
  duplicates: 0,
  malformed: 0,
});

afterEach(() => onProgress(() => {}));

test("the dba step's progress: the small files' rows, then the run's, over all of them", () => {
  const fractions: number[] = [];
  onProgress((f) => fractions.push(f));
  const onFile = filesProgress('dba (narrow)', [
    file(1_000_000, 0),
    file(1_000_000, 1),
    file(25_000_000, 0),
    file(25_000_000, 1),
  ]);
  for (const rows of [1_000_000, 1_000_000, 25_000_000, 25_000_000]) onFile(rows);
  expect(fractions).toEqual([1 / 52, 2 / 52, 27 / 52, 1]);
});

test('without file B, file A is the whole step', () => {
  const fractions: number[] = [];
  onProgress((f) => fractions.push(f));
  filesProgress('pgloader', [file(20_000, 0), undefined])(20_000);
  expect(fractions).toEqual([1]);
});
