/**
 * The HTTP baseline server (baseline-server.ts) as a child process, and the contacts the HTTP step
 * reads and patches through it and through the API.
 */
import type { Sql } from '../../src/db';
import { freePort } from '../../src/embedded';
import type { BenchAccount } from './account';
import { md5Hex, md5Uuid, rowAt, sampleNormalRows } from './dataset';
import { spawnChild, stopChild, waitHealthy, type Infra } from './services';
import type { HttpTarget, PoolContact } from './types';

const POOL_SIZE = 5000;

/**
 * Contacts the HTTP step reads and patches: imported ones when import A ran (`rows` > 0), otherwise
 * the same model rows inserted with SQL, so `--steps http` works alone.
 */
export async function contactPool(sql: Sql, account: BenchAccount, rows: number): Promise<PoolContact[]> {
  const idx = sampleNormalRows(rows || POOL_SIZE * 2, POOL_SIZE, 1);
  const pool = idx.map((i) => ({ email: rowAt(i, 0).email, md5: md5Hex(rowAt(i, 0).email) }));
  if (rows === 0) {
    const records = idx.map((i) => {
      const r = rowAt(i, 0);
      return {
        account_id: account.id,
        email_md5: md5Uuid(md5Hex(r.email)),
        email: r.email,
        attributes: r.attributes,
        first_source: 'import',
      };
    });
    for (let k = 0; k < records.length; k += 1000)
      await sql`insert into contacts ${sql(records.slice(k, k + 1000) as never)}`;
  }
  return pool;
}

export async function startBaseline(infra: Infra, account: BenchAccount) {
  const port = await freePort();
  const baseUrl = `http://127.0.0.1:${port}`;
  const child = spawnChild(
    'baseline',
    'bench/lib/baseline-server.ts',
    { DATABASE_URL: infra.databaseUrl, BASELINE_ACCOUNT_ID: account.id, PORT: String(port) },
    infra.logDir,
  );
  try {
    await waitHealthy(baseUrl, child);
  } catch (e) {
    await stopChild(child);
    throw e;
  }
  const target: HttpTarget = { name: 'baseline', baseUrl, headers: {} };
  return {
    target,
    pid: child.proc.pid,
    pool: (rows: number) => contactPool(infra.sql, account, rows),
    stop: () => stopChild(child),
  };
}
