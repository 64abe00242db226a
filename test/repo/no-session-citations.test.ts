/**
 * A measurement is cited by its finding's file (bench/findings/<date>-<question>.md), never by the
 * session of the team's history that took it (issue 55). This fails on any file of the repository,
 * committed or new, that names a session and its number, also when a line break or a comment's
 * leader (`*`, `//`, `--`, `#`) falls between the two.
 *
 * Not read: binary files (a NUL in their first 8 KB). Nothing is allowed.
 */
import { expect, test } from 'bun:test';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dir, '../..');
const CITATION = /\bsessions?(?:\s|\*|\/\/|--|#|\+)*\d/gi;

function repositoryFiles(): string[] {
  const git = Bun.spawnSync(['git', 'ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT });
  if (git.exitCode !== 0) throw new Error(`git ls-files failed: ${git.stderr.toString()}`);
  return [...new Set(git.stdout.toString().split('\0').filter(Boolean))].sort();
}

/** `file:line: text` of each citation in `text`. */
export function citations(file: string, text: string): string[] {
  const lines = text.split('\n');
  const found: string[] = [];
  for (const m of text.matchAll(CITATION)) {
    const n = text.slice(0, m.index).split('\n').length;
    const line = lines[n - 1] ?? '';
    found.push(`${file}:${n}: ${line.trim().slice(0, 160)}`);
  }
  return found;
}

test('no file cites a session by its number', () => {
  const found: string[] = [];
  for (const file of repositoryFiles()) {
    const path = join(ROOT, file);
    if (!existsSync(path)) continue; // deleted in the working tree, not yet in the index
    const bytes = readFileSync(path);
    if (bytes.subarray(0, 8192).includes(0)) continue;
    found.push(...citations(file, bytes.toString('utf8')));
  }
  expect(found).toEqual([]);
});

test('the check sees a citation across a line break and a comment leader', () => {
  const number = String(7);
  expect(citations('a.ts', `measured in session ${number}.`)).toHaveLength(1);
  expect(citations('a.ts', `// measured in (bench/README.md, Session\n// ${number}).`)).toHaveLength(1);
  expect(citations('a.sql', `-- measured in session\n--   ${number}).`)).toHaveLength(1);
  expect(citations('a.ts', ` * the sessions ${number} and 8`)).toHaveLength(1);
  expect(citations('a.ts', 'a session advisory lock; the session ends; pg_terminate_backend(session_pid)')).toEqual([]);
});
