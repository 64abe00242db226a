import { afterAll, describe, expect, test } from 'bun:test';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { checkDocs, docFiles, pathsIn, slug } from './links';

const ROOT = resolve(import.meta.dir, '..', '..');

describe('the docs check itself, on a fixture with known faults', () => {
  const dir = mkdtempSync(join(tmpdir(), 'docs-links-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const write = (path: string, text: string) => {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  };
  write('src/here.ts', '');
  write(
    'bench/findings/2026-01-01-a-finding.md',
    '# A finding\n\n```sh\nbun bench/old-name.ts   # a record of what was run: not checked\n```\n',
  );
  write(
    'docs/topic.md',
    [
      '# The topic',
      '',
      '## Where `src/` lives (and why)',
      '',
      '## Twice',
      '',
      '## Twice',
      '',
      'Back to the [README](../README.md#quick-start) and [this page](#the-topic).',
    ].join('\n'),
  );
  write(
    'README.md',
    [
      '# Project',
      '',
      '## Quick start',
      '',
      'See [the topic](docs/topic.md), [its heading](docs/topic.md#where-src-lives-and-why),',
      '[the second twice](docs/topic.md#twice-1), [a folder](docs/) and',
      '[a finding](bench/findings/2026-01-01-a-finding.md).',
      'Broken: [gone](docs/gone.md), [no such heading](docs/topic.md#nowhere), [here too](#nope).',
      'Not checked: [a site](https://example.com/x.md), [mail](mailto:a@example.com), [out](../elsewhere/spec.md).',
      '',
      'Paths: `src/here.ts`, `bun src/here.ts:12`, `src/gone.ts`, and one over',
      'two lines `cat src/here.ts',
      'worker/missing.ts` in a span.',
      'Skipped: `src/<feature>/index.ts`, `sql/merge/*.sql`, `contact-imports/<account>/x`, `/v1/contacts`,',
      '`$DATA_DIR/objects`, `.data/postgres`, `[not a link](docs/nothing.md)`.',
      '',
      '```sh',
      'cat src/here.ts src/fenced-gone.ts   # a command of the docs is checked: (`src/<id>.ts` is not)',
      '[a link in a block is text](docs/fenced.md)',
      '```',
      '',
      '  ~~~',
      '  worker/tilde-gone.ts',
      '  ~~~',
    ].join('\n'),
  );

  test('reads README.md, docs/ and bench/findings/', () => {
    expect(docFiles(dir)).toEqual(['README.md', 'docs/topic.md', 'bench/findings/2026-01-01-a-finding.md']);
  });

  test('reports each broken link, anchor and path with its line, and nothing else', () => {
    expect(checkDocs(dir)).toEqual([
      { file: 'README.md', line: 8, kind: 'link', target: 'docs/gone.md' },
      { file: 'README.md', line: 8, kind: 'anchor', target: 'docs/topic.md#nowhere' },
      { file: 'README.md', line: 8, kind: 'anchor', target: '#nope' },
      { file: 'README.md', line: 11, kind: 'path', target: 'src/gone.ts' },
      { file: 'README.md', line: 12, kind: 'path', target: 'worker/missing.ts' },
      { file: 'README.md', line: 18, kind: 'path', target: 'src/fenced-gone.ts' },
      { file: 'README.md', line: 23, kind: 'path', target: 'worker/tilde-gone.ts' },
    ]);
  });

  test('slugs are GitHub’s: lowercase, punctuation dropped, spaces to hyphens', () => {
    expect(slug('Where `src/` lives (and why)')).toBe('where-src-lives-and-why');
    expect(slug('Erasure (the right to be forgotten)')).toBe('erasure-the-right-to-be-forgotten');
    expect(slug('Scale-out model (Citus)')).toBe('scale-out-model-citus');
    expect(slug('Scale-out (2026-11-29): the [link](x.md) stays, `code_name` too')).toBe(
      'scale-out-2026-11-29-the-link-stays-code_name-too',
    );
  });

  test('a path is a token under a top-level folder of the repo, placeholders and globs skipped', () => {
    expect(pathsIn('bun test/run.ts test/docs/links.test.ts')).toEqual(['test/run.ts', 'test/docs/links.test.ts']);
    expect(pathsIn('(src/db/index.ts), .ci/run;')).toEqual(['src/db/index.ts', '.ci/run']);
    expect(pathsIn('src/<feature>/ sql/merge/*.sql bench/results/{a,b} docs/… src')).toEqual([]);
    expect(pathsIn('UPDATE=1 ../shared/vendor/x.tar.gz /docs/json contact-imports/a/b')).toEqual([]);
  });
});

describe('the repository’s docs', () => {
  test('every relative link, anchor and repo path they name exists', () => {
    const files = docFiles(ROOT);
    expect(files).toContain('README.md');
    expect(files).toContain('CONTRIBUTING.md');
    expect(files.filter((f) => f.startsWith('docs/')).length).toBeGreaterThan(0);
    // As `file:line kind target` lines, so that the suite's summary names each one readably.
    const problems = checkDocs(ROOT, files).map((p) => `${p.file}:${p.line} ${p.kind} ${p.target}`);
    expect(problems).toEqual([]);
  });
});
