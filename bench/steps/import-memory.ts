/**
 * Flat memory of the import pipeline: imports a 1M-row and a 5M-row file, each in its own worker
 * process (test/helpers/run-import.ts), and reports each process's peak RSS. The pipeline streams,
 * so the two peaks should differ by well under 50 MB (DESIGN.md: peak RSS does not grow with the
 * file size).
 *
 * usage: bun bench/steps/import-memory.ts [--rows 1000000,5000000] [--batch 100000] [--dir .data/bench/memory]
 * Uses DATABASE_URL or the embedded PostgreSQL; a fresh database is created and dropped.
 * Exit 1 when an import fails or the peaks differ by 50 MB or more.
 */
import { existsSync } from 'node:fs';
import { mkdir, rename, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Sql } from '../../src/db';
import { createTestDatabase } from '../../test/helpers/db';
import { importRow, stageImport, tempStore } from '../../test/helpers/file-store';
import { createAccount, createAttribute, createBrand } from '../../test/helpers/fixtures';
import { startTestServices } from '../../test/helpers/services';

const LIMIT_MB = 50;

function args() {
  const a = process.argv.slice(2);
  const get = (flag: string, fallback: string) => {
    const i = a.indexOf(flag);
    return i === -1 ? fallback : (a[i + 1] ?? fallback);
  };
  return {
    rows: get('--rows', '1000000,5000000')
      .split(',')
      .map((n) => Number(n.replaceAll('_', ''))),
    batch: Number(get('--batch', '100000')),
    dir: resolve(get('--dir', '.data/bench/memory')),
  };
}

/** Deterministic rows, written in 4 MB pieces: the generator's memory is flat too. About 80 bytes a row. */
async function generate(path: string, rows: number): Promise<number> {
  if (existsSync(path)) return (await stat(path)).size;
  const tmp = `${path}.partial`;
  const w = Bun.file(tmp).writer({ highWaterMark: 4 << 20 });
  w.write('Email,firstName,score,tags,Brand\n');
  let chunk = '';
  for (let i = 0; i < rows; i++) {
    const tags = `t${i % 7};t${i % 11}`;
    chunk += `user${i}@example${i % 97}.com,Name ${i % 5003},${i % 1000}.5,${tags},${i % 3 === 0 ? 'alpha' : 'beta'}\n`;
    if (chunk.length > 1 << 22) {
      w.write(chunk);
      await w.flush();
      chunk = '';
    }
  }
  w.write(chunk);
  await w.end();
  await rename(tmp, path);
  return (await stat(path)).size;
}

async function account(sql: Sql): Promise<string> {
  const id = await createAccount(sql, 'memory bench');
  await createAttribute(sql, id, 'firstName', 'string');
  await createAttribute(sql, id, 'score', 'number');
  await createAttribute(sql, id, 'tags', 'array');
  await createBrand(sql, id, 'Alpha');
  await createBrand(sql, id, 'Beta');
  return id;
}

const opts = args();
await mkdir(opts.dir, { recursive: true });
const services = await startTestServices((m) => console.error(m));
process.env.TEST_ADMIN_DATABASE_URL = services.adminUrl;
process.env.TEST_REDIS_URL = services.redisUrl;
const db = await createTestDatabase();
const files = await tempStore();
const results: { rows: number; fileMb: number; peakRssMb: number; seconds: number; rowsPerSecond: number }[] = [];
let failed = false;
try {
  for (const rows of opts.rows) {
    const path = join(opts.dir, `memory-${rows}.csv`);
    const bytes = await generate(path, rows);
    const accountId = await account(db.sql);
    const importId = await stageImport(
      db.sql,
      files.store,
      accountId,
      { path },
      { columns: ['Email', 'firstName', 'score', 'tags', 'Brand'] },
    );
    const child = Bun.spawn(
      [
        process.execPath,
        join(import.meta.dir, '../../test/helpers/run-import.ts'),
        db.url,
        files.dir,
        accountId,
        importId,
        String(opts.batch),
      ],
      {
        stdout: 'pipe',
        stderr: 'ignore',
      },
    );
    const out = await new Response(child.stdout).text();
    const code = await child.exited;
    const report = JSON.parse(out.trim().split('\n').pop() ?? '{}') as {
      ok: boolean;
      maxRssKb: number;
      vmHwmKb: number;
      ms: number;
    };
    const row = await importRow(db.sql, accountId, importId);
    if (code !== 0 || row.status !== 'success' || row.addedCount !== rows) {
      console.error(`import of ${rows} rows did not succeed: exit ${code}, ${JSON.stringify(row)}`);
      failed = true;
    }
    const peakKb = Number.isFinite(report.vmHwmKb) ? report.vmHwmKb : report.maxRssKb;
    results.push({
      rows,
      fileMb: Math.round(bytes / 1e6),
      peakRssMb: Math.round(peakKb / 1024),
      seconds: report.ms / 1000,
      rowsPerSecond: Math.round(rows / (report.ms / 1000)),
    });
    console.error(
      `${rows} rows (${Math.round(bytes / 1e6)} MB): peak RSS ${Math.round(peakKb / 1024)} MB, ` +
        `${(report.ms / 1000).toFixed(1)} s`,
    );
    await db.sql`delete from contacts where account_id = ${accountId}`;
  }
} finally {
  await files.remove();
  await db.drop();
  await services.stop();
}
const peaks = results.map((r) => r.peakRssMb);
const spread = Math.max(...peaks) - Math.min(...peaks);
console.log(JSON.stringify({ batch: opts.batch, results, spreadMb: spread, limitMb: LIMIT_MB }, null, 2));
if (failed || spread >= LIMIT_MB) process.exit(1);
