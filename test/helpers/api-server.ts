import { mkdtemp, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Server } from 'bun';
import { loadConfig } from '../../src/config';
import type { Deps } from '../../src/deps';
import { serveApi } from '../../src/http/server';
import { createStore, type LocalStore } from '../../src/storage';
import { DOCS_URL } from './app';
import { createTestDatabase, type TestDatabase } from './db';
import { createAccount, createKey } from './fixtures';

/** What a raw exchange gave: the status line's code and what followed, or that the server sent nothing. */
export interface RawAnswer {
  /** 0 when the connection closed without a status line. */
  status: number;
  headers: Map<string, string>;
  body: string;
  /** Bytes the server sent, all of them. */
  bytes: number;
}

export interface ServedApi {
  db: TestDatabase;
  deps: Deps;
  server: Server<undefined>;
  port: number;
  accountId: string;
  key: string;
  store: LocalStore;
  /** Writes `request` on a new TCP connection, reads until the server closes it, parses the answer. */
  raw(request: string | Uint8Array): Promise<RawAnswer>;
  close(): Promise<void>;
}

/** The API served by `serveApi` (as src/index.ts serves it) on a free port, over a fresh database. */
export async function serveTestApi(env: Record<string, string> = {}): Promise<ServedApi> {
  const dir = await mkdtemp(join(tmpdir(), 'api-server-'));
  const db = await createTestDatabase();
  const config = loadConfig({
    DOCS_URL,
    DATA_DIR: dir,
    STORAGE_DIR: join(dir, 'objects'),
    PUBLIC_URL: 'http://api.test',
    LOG_LEVEL: 'error',
    ...env,
  });
  const store = (await createStore(config)) as LocalStore;
  const deps: Deps = { config, sql: db.sql, storage: store };
  const server = serveApi(deps, { port: 0, hostname: '127.0.0.1' });
  const port = server.port!;
  const accountId = await createAccount(db.sql);
  const key = await createKey(db.sql, accountId);
  return {
    db,
    deps,
    server,
    port,
    accountId,
    key,
    store,
    raw: (request) => rawExchange(port, request),
    async close() {
      await server.stop(true);
      await db.drop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

const TIMEOUT_MS = 15_000;

/** One request on its own connection; the answer once the server closes it (or TIMEOUT_MS passes). */
export function rawExchange(port: number, request: string | Uint8Array): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no end of answer within ${TIMEOUT_MS} ms`));
    }, TIMEOUT_MS);
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.on('error', () => {}); // a reset shows as a short or empty answer
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(parseAnswer(Buffer.concat(chunks)));
    });
    socket.write(request);
  });
}

function parseAnswer(data: Buffer): RawAnswer {
  const headers = new Map<string, string>();
  const end = data.indexOf('\r\n\r\n');
  const head = (end < 0 ? data : data.subarray(0, end)).toString('latin1');
  const [statusLine, ...lines] = head.split('\r\n');
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? '')?.[1] ?? 0);
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
  }
  let body = end < 0 ? Buffer.alloc(0) : data.subarray(end + 4);
  if (headers.get('transfer-encoding')?.toLowerCase() === 'chunked') body = dechunk(body);
  return { status, headers, body: body.toString('utf8'), bytes: data.length };
}

function dechunk(data: Buffer): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  while (at < data.length) {
    const lineEnd = data.indexOf('\r\n', at);
    if (lineEnd < 0) break;
    const size = parseInt(data.subarray(at, lineEnd).toString('latin1'), 16);
    if (!size) break;
    parts.push(data.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
  return Buffer.concat(parts);
}

/** A request as bytes: `Connection: close` so the answer ends with the connection. */
export function httpRequest(
  method: string,
  target: string,
  opts: { host?: string | null; headers?: Record<string, string>; body?: string | Uint8Array; version?: string } = {},
): Uint8Array {
  const lines = [`${method} ${target} ${opts.version ?? 'HTTP/1.1'}`];
  if (opts.host !== null) lines.push(`Host: ${opts.host ?? 'localhost'}`);
  for (const [k, v] of Object.entries(opts.headers ?? {})) lines.push(`${k}: ${v}`);
  const body = typeof opts.body === 'string' ? Buffer.from(opts.body, 'utf8') : opts.body;
  if (
    body !== undefined &&
    !Object.keys(opts.headers ?? {}).some(
      (k) => k.toLowerCase() === 'content-length' || k.toLowerCase() === 'transfer-encoding',
    )
  ) {
    lines.push(`Content-Length: ${body.length}`);
  }
  lines.push('Connection: close', '', '');
  return Buffer.concat([Buffer.from(lines.join('\r\n'), 'latin1'), Buffer.from(body ?? new Uint8Array())]);
}

/** The problem body of an answer, or undefined when it is not problem+json. */
export function problemOf(answer: RawAnswer): any {
  if (!answer.headers.get('content-type')?.startsWith('application/problem+json')) return undefined;
  try {
    return JSON.parse(answer.body);
  } catch {
    return undefined;
  }
}
