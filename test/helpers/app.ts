import { loadConfig } from '../../src/config';
import { buildApp } from '../../src/app';
import { connect } from '../../src/db';
import type { Deps } from '../../src/deps';
import { createTestDatabase, type TestDatabase } from './db';
import { createAccount, createKey } from './fixtures';

export interface Call {
  status: number;
  headers: Headers;
  body: any;
}

export interface TestApp {
  db: TestDatabase;
  deps: Deps;
  app: ReturnType<typeof buildApp>;
  accountId: string;
  key: string;
  /** Calls the app in-process, as `app.handle(new Request(…))`, with the account's key by default. */
  call(
    method: string,
    path: string,
    opts?: { body?: unknown; key?: string | null; headers?: Record<string, string>; raw?: string },
  ): Promise<Call>;
  close(): Promise<void>;
}

export const DOCS_URL = 'https://docs.test';

/**
 * An app over a fresh database with one account and a full-scope key. With `observe`, the app has
 * a pool of its own that shows it every statement the app sends (fixtures use `db.sql`, unseen).
 */
export async function testApp(
  extra: Partial<Deps> = {},
  env: Record<string, string> = {},
  observe?: (query: string) => void,
): Promise<TestApp> {
  const db = await createTestDatabase();
  const config = loadConfig({ DOCS_URL, DATA_DIR: '/tmp/contact-service-test', ...env });
  const url = apiNodeUrl(db);
  const sql =
    observe || url !== db.url
      ? connect(url, 10, observe ? { debug: (_connection, query) => observe(query) } : {})
      : db.sql;
  const stop = new AbortController();
  // On a cluster the contact fast path sends each account's statements to its node, on pools that
  // show their statements to `observe` too (src/db/account-nodes.ts).
  const nodePool = (node: { host: string; port: number }) =>
    connect(url, 10, { node, ...(observe && { debug: (_connection, query) => observe(query) }) });
  const deps: Deps = { config, sql, stop: stop.signal, nodePool, ...extra };
  const app = buildApp(deps);
  const accountId = await createAccount(db.sql);
  const key = await createKey(db.sql, accountId);
  async function call(
    method: string,
    path: string,
    opts: { body?: unknown; key?: string | null; headers?: Record<string, string>; raw?: string } = {},
  ): Promise<Call> {
    const headers: Record<string, string> = { ...opts.headers };
    const k = opts.key === undefined ? key : opts.key;
    if (k !== null) headers.authorization = `Bearer ${k}`;
    let body: string | undefined = opts.raw;
    if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await app.handle(new Request(`http://localhost${path}`, { method, headers, body }));
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      // not JSON: the body stays the text
    }
    return { status: res.status, headers: res.headers, body: parsed };
  }
  async function close(): Promise<void> {
    stop.abort();
    if (sql !== db.sql) await sql.end({ timeout: 2 });
    await db.drop();
  }
  return { db, deps, app, accountId, key, call, close };
}

let apps = 0;

/**
 * A node for an app or an API process to connect to: on a Citus cluster a worker, each call the
 * next one, so that the contract files run with the API off the coordinator, as docs/scaling-out.md
 * deploys it (the fixtures and checks stay on the coordinator, as the admin CLI does); on one
 * PostgreSQL the database's URL.
 */
export function apiNodeUrl(db: TestDatabase): string {
  return db.workerUrls.length ? db.workerUrls[apps++ % db.workerUrls.length]! : db.url;
}

/** Asserts the RFC 9457 envelope; returns the body for further checks. */
export function expectProblem(res: Call, status: number, code: string): any {
  const ok =
    res.status === status &&
    res.headers.get('content-type')?.startsWith('application/problem+json') &&
    res.body?.code === code &&
    res.body?.status === status &&
    res.body?.type === `${DOCS_URL}/error-codes#${code}` &&
    typeof res.body?.title === 'string' &&
    typeof res.body?.detail === 'string';
  if (!ok)
    throw new Error(
      `expected ${status} ${code} problem, got ${res.status} ${res.headers.get('content-type')} ` +
        JSON.stringify(res.body),
    );
  return res.body;
}
