/**
 * Manual suppression imports at scale, through runManualSuppressionImport into a fresh database:
 *   1. a deterministic file of 10 million md5 lines (1% repeats, some in upper case) into an empty
 *      list: the bulk path (sorted beside the database, COPY straight into the table);
 *   2. the same file again: every record a duplicate;
 *   3. a second file of 10 million, half of them already on the list: the staged path (COPY into a
 *      temp table, anti-join, insert of the new ones).
 * Files are streamed to /tmp (never held in memory) and reused when already there. Prints the
 * times and exits non-zero unless every count is exact.
 *
 *   node_modules/.bin/bun bench/steps/suppression-import.ts [--lines N] [--only-first] [--keep]
 *
 * Uses DATABASE_URL, or the embedded PostgreSQL under .data (started when not running).
 */
import { createHash } from 'node:crypto';
import { createWriteStream, existsSync, statSync } from 'node:fs';
import { rename } from 'node:fs/promises';
import { once } from 'node:events';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '../../src/config';
import { connect } from '../../src/db';
import { migrate } from '../../src/migrate';
import { resolveDatabaseUrl } from '../../src/embedded/urls';
import { runManualSuppressionImport } from '../../src/suppressions/bulk/manual-import';

const { values: args } = parseArgs({
  options: {
    lines: { type: 'string', default: '10000000' },
    'only-first': { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
  },
});
const N = Number(args.lines);
if (!Number.isInteger(N) || N < 200 || N % 200 !== 0) throw new Error('--lines must be a multiple of 200');
const LINE_BYTES = 33;
const digest = (i: number) => createHash('md5').update(`record-${i}`).digest('hex');

/**
 * File 1, line i: record i, except every 100th line (i % 100 = 99), which repeats line i - 50 in
 * upper case. File 2, line i: record N/2 + i, all distinct.
 */
const FILES = {
  first: {
    path: `/tmp/suppression-bench-${N}.md5`,
    line: (i: number) => (i % 100 === 99 ? digest(i - 50).toUpperCase() : digest(i)),
  },
  second: { path: `/tmp/suppression-bench-${N}-second.md5`, line: (i: number) => digest(N / 2 + i) },
};
const DISTINCT_FIRST = N - N / 100;
// Of file 2's records N/2 … 3N/2 - 1, those below N are on the list unless they end in 99.
const ADDED_SECOND = N / 2 + N / 2 / 100;

async function generate({ path, line }: { path: string; line: (i: number) => string }): Promise<void> {
  if (existsSync(path) && statSync(path).size === N * LINE_BYTES) return;
  const started = performance.now();
  const out = createWriteStream(`${path}.partial`);
  const BATCH = 10_000;
  for (let i = 0; i < N;) {
    const buf = Buffer.allocUnsafe(Math.min(BATCH, N - i) * LINE_BYTES);
    let o = 0;
    for (const end = Math.min(i + BATCH, N); i < end; i++) {
      o += buf.write(line(i), o, 'latin1');
      buf[o++] = 0x0a;
    }
    if (!out.write(buf)) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
  await rename(`${path}.partial`, path);
  console.log(`generated ${path} (${N} lines) in ${((performance.now() - started) / 1000).toFixed(1)} s`);
}

const config = loadConfig({
  ...process.env,
  DATA_DIR: process.env.DATA_DIR ?? resolve(import.meta.dir, '../../.data'),
});
const server = await resolveDatabaseUrl(config, (m) => console.error(m));
const admin = connect(server.url, 1);
const dbName = `bench_suppressions_${Date.now()}`;
await admin.unsafe(`create database ${dbName}`);
const url = new URL(server.url);
url.pathname = `/${dbName}`;
const sql = connect(url.toString(), 4);
let failed = false;
try {
  await generate(FILES.first);
  if (!args['only-first']) await generate(FILES.second);
  await migrate(sql);
  const [account] = await sql<{ id: string }[]>`insert into accounts (name) values ('bench') returning id`;
  const [list] = await sql<
    { id: string }[]
  >`insert into suppression_lists (account_id, name, format) values (${account!.id}, 'bench', 'md5') returning id`;
  const target = { accountId: account!.id, listId: list!.id };
  const runs = [
    { name: '1. into an empty list', file: FILES.first.path, added: DISTINCT_FIRST, total: DISTINCT_FIRST },
    { name: '2. the same file again', file: FILES.first.path, added: 0, total: DISTINCT_FIRST },
    { name: '3. half new', file: FILES.second.path, added: ADDED_SECOND, total: DISTINCT_FIRST + ADDED_SECOND },
  ].slice(0, args['only-first'] ? 1 : 3);
  console.log(`load average before: ${(await Bun.file('/proc/loadavg').text()).trim()}`);
  for (const r of runs) {
    console.log(r.name);
    const started = performance.now();
    const result = await runManualSuppressionImport(sql, {
      ...target,
      file: r.file,
      log: (m) => console.log(`  ${m}`),
    });
    const seconds = (performance.now() - started) / 1000;
    const [stored] = await sql<{ record_count: number; rows: number }[]>`
      select l.record_count,
             (select count(*)::int from suppression_records r
              where r.account_id = l.account_id and r.list_id = l.id) as rows
      from suppression_lists l where l.account_id = ${target.accountId} and l.id = ${target.listId}`;
    const ok =
      result.totalCount === N &&
      result.addedCount === r.added &&
      result.duplicateCount === N - r.added &&
      result.malformedCount === 0 &&
      stored!.record_count === r.total &&
      stored!.rows === r.total;
    console.log(
      `  ${seconds.toFixed(1)} s for ${N} lines (${Math.round(N / seconds)} lines/s) ${JSON.stringify(result)} ` +
        `recordCount=${stored!.record_count} ` +
        (ok ? 'OK' : `MISMATCH (expected added ${r.added}, recordCount ${r.total})`),
    );
    if (!ok) failed = true;
  }
  console.log(`load average after: ${(await Bun.file('/proc/loadavg').text()).trim()}`);
} finally {
  await sql.end();
  if (!args.keep) await admin.unsafe(`drop database if exists ${dbName} with (force)`);
  else console.log(`kept database ${dbName}`);
  await admin.end();
  await server.stop();
}
process.exit(failed ? 1 : 0);
