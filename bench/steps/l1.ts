/**
 * Baseline L1: the same CSV loaded by PostgreSQL's own COPY (`format csv, header`), streamed from
 * disk through postgres.js into an UNLOGGED table of text columns without indexes. Nothing is parsed,
 * validated, hashed, deduplicated or merged: it is the floor any import of the file stands on.
 */
import { createReadStream } from 'node:fs';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Sql } from '../../src/db';
import type { FileMeta } from '../lib/generate';
import { Progress } from '../lib/format';
import { shapeOf } from '../lib/shapes';

const TABLE = 'bench_l1_copy';

export interface L1Result {
  seconds: number;
  rows: number;
  bytes: number;
}

export async function runL1(sql: Sql, file: FileMeta): Promise<L1Result> {
  const columns = shapeOf(file)
    .columns.map((_, c) => `c${c} text`)
    .join(', ');
  await sql.unsafe(`drop table if exists ${TABLE}`);
  await sql.unsafe(`create unlogged table ${TABLE} (${columns})`);
  try {
    const progress = new Progress(`L1 copy${shapeOf(file).suffix}`, Math.round(file.bytes / 1e6), 'MB');
    let sent = 0;
    const counter = new Transform({
      transform(chunk: Buffer, _enc, done) {
        sent += chunk.length;
        progress.update(Math.round(sent / 1e6));
        done(null, chunk);
      },
    });
    const started = performance.now();
    const writable = await sql.unsafe(`copy ${TABLE} from stdin with (format csv, header)`).writable();
    await pipeline(createReadStream(file.path, { highWaterMark: 1 << 20 }), counter, writable);
    const seconds = (performance.now() - started) / 1000;
    progress.done();
    // Verified after timing: every data line of the file is a row of the table.
    const [{ n } = { n: -1 }] = await sql<{ n: number }[]>`select count(*)::int as n from bench_l1_copy`;
    if (n !== file.rows) throw new Error(`L1 loaded ${n} rows, the file has ${file.rows}`);
    return { seconds, rows: n, bytes: file.bytes };
  } finally {
    await sql.unsafe(`drop table if exists ${TABLE}`);
  }
}
