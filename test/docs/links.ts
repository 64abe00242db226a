/**
 * The docs' link and path check: every relative markdown link (and its #anchor) and every repo path
 * named in backticks must exist in the tree. Pure file reading, no services: `test/docs/links.test.ts`
 * runs it on a fixture with known faults and on the repository's own docs.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';

/** A link, anchor or path that a doc names and the tree does not have. */
export interface Problem {
  file: string;
  line: number;
  kind: 'link' | 'anchor' | 'path';
  target: string;
}

/**
 * A token in backticks counts as a repo path when it starts with one of these top-level folders.
 * Anything else (`contact-imports/<account>/…` object keys, `/v1/…` routes, `.data/…`) is not a repo path.
 */
export const PATH_ROOTS = ['src', 'worker', 'test', 'bench', 'sql', 'docs', 'patches', 'scripts', '.ci'];

/** Placeholders (`<id>`, `{id}`, `$DIR`, `…`) and globs (`*.sql`, `?`, `[ab]`) name no one file: skipped. */
const NOT_ONE_PATH = /[<>{}$…*?[\]|]|\.\.\./;

/** The docs the check reads: the README, CONTRIBUTING.md, docs/, the bench's README and findings. */
export function docFiles(root: string): string[] {
  const found: string[] = [];
  for (const f of ['README.md', 'CONTRIBUTING.md', 'bench/README.md']) if (existsSync(join(root, f))) found.push(f);
  const walk = (dir: string) => {
    if (!existsSync(join(root, dir))) return;
    const entries = readdirSync(join(root, dir), { withFileTypes: true });
    for (const entry of entries.sort((a, b) => (a.name < b.name ? -1 : 1)))
      if (entry.isDirectory()) walk(`${dir}/${entry.name}`);
      else if (entry.name.endsWith('.md')) found.push(`${dir}/${entry.name}`);
  };
  walk('docs');
  walk('bench/findings');
  return found;
}

/**
 * GitHub's heading anchor: lowercased, punctuation other than `-` and `_` dropped, each space a `-`
 * (github-slugger), after the markup is taken out: `code` keeps its text, a link its label.
 */
export function slug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .replace(/`/g, '');
  return text
    .toLowerCase()
    .trim()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '')
    .replace(/ /g, '-');
}

/**
 * The text with fenced code blocks blanked (their lines kept, so offsets still give line numbers),
 * and the blocks' lines by number.
 */
function splitFences(text: string): { prose: string; fenced: Map<number, string> } {
  const lines = text.split('\n');
  const fenced = new Map<number, string>();
  let fence: string | undefined;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? '';
    const open = /^\s*(`{3,}|~{3,})/.exec(line);
    if (fence === undefined && open) {
      fence = open[1];
      lines[i] = '';
    } else if (fence !== undefined) {
      if (line.trim().startsWith(fence) && line.trim().replace(/[`~]/g, '') === '') fence = undefined;
      else fenced.set(i + 1, line);
      lines[i] = '';
    }
  }
  return { prose: lines.join('\n'), fenced };
}

/**
 * Whether a file's fenced blocks are checked too: the service's docs show commands to run now; the
 * bench's findings record commands as they were run, against the tree of their day.
 */
const fencesChecked = (file: string) => !file.startsWith('bench/');

/** Inline code spans (a run of backticks up to the next run of the same length, across line breaks). */
function codeSpans(text: string): { start: number; end: number; code: string }[] {
  const spans: { start: number; end: number; code: string }[] = [];
  const ticks = /`+/g;
  let m: RegExpExecArray | null;
  while ((m = ticks.exec(text))) {
    const run = m[0];
    const close = new RegExp(`(?<!\`)${run}(?!\`)`, 'g');
    close.lastIndex = m.index + run.length;
    const end = close.exec(text);
    if (!end) continue;
    // A span does not run past a blank line (a new paragraph).
    const code = text.slice(m.index + run.length, end.index);
    if (/\n\s*\n/.test(code)) continue;
    spans.push({ start: m.index, end: end.index + run.length, code });
    ticks.lastIndex = end.index + run.length;
  }
  return spans;
}

/** The anchors of a markdown file's headings, duplicates numbered as GitHub numbers them. */
function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const line of splitFences(text).prose.split('\n')) {
    const h = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!h) continue;
    const base = slug(h[1] ?? '');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** The repo paths named in a code span: tokens under a known top-level folder, placeholders skipped. */
export function pathsIn(code: string): string[] {
  const paths: string[] = [];
  for (const raw of code.split(/\s+/)) {
    const token = raw
      .replace(/^[("'=]+/, '')
      .replace(/[)"',.;:]+$/, '')
      .replace(/:\d+(-\d+)?$/, '')
      .replace(/#.*$/, '');
    if (!PATH_ROOTS.some((r) => token === r || token.startsWith(`${r}/`))) continue;
    if (!token.includes('/') || NOT_ONE_PATH.test(token)) continue;
    paths.push(token);
  }
  return paths;
}

/**
 * Every link, anchor and path of `files` (relative to `root`) that the tree does not have. Paths are
 * read from code spans, and from fenced blocks outside bench/; links from the prose.
 */
export function checkDocs(root: string, files: string[] = docFiles(root)): Problem[] {
  const problems: Problem[] = [];
  const anchorCache = new Map<string, Set<string>>();
  const anchors = (abs: string) => {
    let set = anchorCache.get(abs);
    if (!set) anchorCache.set(abs, (set = anchorsOf(readFileSync(abs, 'utf8'))));
    return set;
  };
  const top = resolve(root);
  for (const file of files) {
    const found: Problem[] = [];
    const abs = join(top, file);
    const { prose: text, fenced } = splitFences(readFileSync(abs, 'utf8'));
    if (fencesChecked(file))
      for (const [line, code] of fenced)
        for (const path of pathsIn(code))
          if (!existsSync(join(top, path))) found.push({ file, line, kind: 'path', target: path });
    const lineAt = (offset: number) => text.slice(0, offset).split('\n').length;
    const spans = codeSpans(text);
    for (const { start, code } of spans)
      for (const path of pathsIn(code))
        if (!existsSync(join(top, path))) found.push({ file, line: lineAt(start), kind: 'path', target: path });
    // Links outside code spans only: a span's `[x](y)` is text, not a link.
    let prose = text;
    for (const { start, end } of spans)
      prose = prose.slice(0, start) + prose.slice(start, end).replace(/[^\n]/g, ' ') + prose.slice(end);
    const links = /!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)|^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/gm;
    let m: RegExpExecArray | null;
    while ((m = links.exec(prose))) {
      const target = m[1] ?? m[2] ?? '';
      if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//')) continue;
      const line = lineAt(m.index + (m[0].length - m[0].trimStart().length));
      const [pathPart = '', fragment] = target.split('#', 2);
      const dest = pathPart === '' ? abs : resolve(dirname(abs), decodeURIComponent(pathPart));
      // A link out of the repository (the shared spec beside it) is not the tree's to check.
      if (relative(top, dest).startsWith(`..${sep}`) || relative(top, dest) === '..') continue;
      if (!existsSync(dest)) {
        found.push({ file, line, kind: 'link', target });
        continue;
      }
      if (fragment === undefined || fragment === '' || statSync(dest).isDirectory() || !dest.endsWith('.md')) continue;
      if (!anchors(dest).has(decodeURIComponent(fragment).toLowerCase()))
        found.push({ file, line, kind: 'anchor', target });
    }
    problems.push(...found.sort((a, b) => a.line - b.line));
  }
  return problems;
}
