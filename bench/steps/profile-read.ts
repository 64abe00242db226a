/**
 * Where the import's read phase spends its time: the worker's own read components run on the bench
 * file in cumulative passes (disk → + UTF-8 decode and papaparse → + validate and md5 into the
 * staged row's fields → + its binary COPY into an unlogged staging table), each pass timed alone; differences
 * between passes are the cost of each component. Plus md5 alone, from a micro-benchmark on real
 * emails. The dedupe / merge / finish split comes from the import's phase column (import-flow.ts).
 * Run alone: `bun bench/steps/profile-read.ts --file .data/bench/files/contacts-1000000-a.csv`.
 */
import { createReadStream } from 'node:fs';
import type { Sql } from '../../src/db';
import { BrandIndex, RowReader, type Column } from '../../worker/import/cells';
import { CopySink } from '../../worker/import/copy-sink';
import { parseCsv, utf8Text } from '../../worker/import/csv';
import { accountLiteral, rowsTableDdl } from '../../worker/import/staging';
import { ATTRIBUTES, BRANDS } from '../lib/dataset';

export interface ReadProfile {
  rows: number;
  /** seconds of each cumulative pass */
  passes: { pass: string; seconds: number }[];
  /** md5 of one lowercased email, nanoseconds (so rows × this = the hash share) */
  md5Ns: number;
}

/** The bench file's columns as the import reads them (an account's schema of the dataset's attributes). */
export const COLUMNS: Column[] = [
  { name: 'Email', type: 'identity' },
  { name: 'Brand', type: 'brand' },
  ...ATTRIBUTES.map((a) => ({ name: a.name, type: a.type })),
];
const open = (path: string) => createReadStream(path, { highWaterMark: 1 << 20 });

async function timed(fn: () => Promise<number>): Promise<{ seconds: number; n: number }> {
  const started = performance.now();
  const n = await fn();
  return { seconds: (performance.now() - started) / 1000, n };
}

/** Parses the file and hands every data row (after the header) to `each`. */
export async function parseRows(
  path: string,
  each: (cells: string[], rowNo: number) => void,
  onChunk?: (text: ReturnType<typeof utf8Text>) => void,
): Promise<number> {
  const text = utf8Text(open(path));
  let rowNo = -1;
  await parseCsv(text, (rows) => {
    for (const cells of rows) {
      if (cells.length === 1 && cells[0] === '') continue;
      if (rowNo++ >= 0) each(cells, rowNo);
    }
    onChunk?.(text);
  });
  return rowNo;
}

export async function profileRead(sql: Sql, path: string, log: (m: string) => void): Promise<ReadProfile> {
  const brands = new BrandIndex(BRANDS.map((name) => ({ id: crypto.randomUUID(), name })));
  const reader = new RowReader(COLUMNS, brands, []);
  const passes: ReadProfile['passes'] = [];
  const pass = async (name: string, fn: () => Promise<number>) => {
    const r = await timed(fn);
    passes.push({ pass: name, seconds: r.seconds });
    log(`[profile] ${name}: ${r.seconds.toFixed(2)} s (${r.n.toLocaleString('en-US')})`);
    return r.n;
  };

  await pass('disk read', async () => {
    let bytes = 0;
    for await (const chunk of open(path)) bytes += (chunk as Buffer).length;
    return bytes;
  });
  const rows = await pass('+ decode + papaparse', () => parseRows(path, () => {}));
  const emails: string[] = [];
  await pass('+ validate + md5 (staged row)', async () => {
    let good = 0;
    await parseRows(path, (cells, rowNo) => {
      if (reader.read(rowNo, cells) !== undefined) good++;
      if (emails.length < 100_000) emails.push(cells[0]!.trim().toLowerCase());
    });
    return good;
  });

  const conn = await sql.reserve();
  const table = 'bench_profile_rows';
  try {
    await conn.unsafe(`drop table if exists ${table}`);
    for (const statement of rowsTableDdl(table, accountLiteral(crypto.randomUUID()))) await conn.unsafe(statement);
    await pass('+ binary row + COPY to staging (= read phase)', async () => {
      const sink = new CopySink(conn, table, 100_000);
      await parseRows(
        path,
        (cells, rowNo) => {
          const row = reader.read(rowNo, cells);
          if (row !== undefined) sink.add(row);
        },
        (text) => {
          if (!sink.ready) {
            text.pause();
            sink.whenReady().then(
              () => text.resume(),
              (e) => text.destroy(e),
            );
          }
        },
      );
      await sink.flush();
      return sink.rows;
    });
  } finally {
    await conn.unsafe(`drop table if exists ${table}`).catch(() => {});
    conn.release();
  }

  const rounds = 10;
  const md5 = new Uint8Array(16);
  const started = performance.now();
  for (let r = 0; r < rounds; r++) for (const e of emails) Bun.MD5.hash(e, md5);
  const md5Ns = ((performance.now() - started) * 1e6) / (rounds * Math.max(1, emails.length));
  return { rows, passes, md5Ns };
}

/** `disk read 0.3s | + decode + papaparse 4.1s | …  (md5 ≈ 0.6 s of it)` */
export function readProfileLine(p: ReadProfile): string {
  const parts = p.passes.map((x) => `${x.pass} ${x.seconds.toFixed(1)}s`).join(' | ');
  return `${parts}  (md5 alone ≈ ${((p.md5Ns * p.rows) / 1e9).toFixed(2)}s at ${p.md5Ns.toFixed(0)} ns/row)`;
}

if (import.meta.main) {
  const { startInfra } = await import('../lib/services');
  const at = process.argv.indexOf('--file');
  const file = at > 0 ? process.argv[at + 1] : undefined;
  if (!file) throw new Error('usage: bun bench/steps/profile-read.ts --file PATH');
  const infra = await startInfra(console.error);
  try {
    console.log(readProfileLine(await profileRead(infra.sql, file, console.error)));
  } finally {
    await infra.stop();
  }
}
