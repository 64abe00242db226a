/**
 * The HTTP baseline: plain Bun.serve + postgres.js running the one SQL statement each request
 * boils down to. No framework, no auth, no validation, no schema lookups, no write guard: what the
 * API costs on top of this is what the HTTP ratios measure.
 * Env: DATABASE_URL, BASELINE_ACCOUNT_ID, PORT (0 = any), DATABASE_POOL_SIZE (default 10, as the API).
 * BASELINE_PROCESSES=N (N > 1, a fixed PORT): N such servers on the port (SO_REUSEPORT), each with
 * DATABASE_POOL_SIZE / N connections as each of N API processes has (src/db/pool.ts apiPoolSize),
 * children of this one, which stops them on SIGTERM: the bare server beside API_PROCESSES=N.
 */
import { createHash } from 'node:crypto';
import { connect } from '../../src/db';

const processes = Number(process.env.BASELINE_PROCESSES ?? 1);
if (processes > 1 && !process.env.BASELINE_IN_GROUP) {
  const pool = Math.max(2, Math.floor(Number(process.env.DATABASE_POOL_SIZE ?? 10) / processes));
  const env = { ...process.env, BASELINE_IN_GROUP: '1', DATABASE_POOL_SIZE: String(pool) };
  const children = Array.from({ length: processes }, () =>
    Bun.spawn([process.execPath, import.meta.path], { env, stdio: ['ignore', 'inherit', 'inherit'] }),
  );
  process.on('SIGTERM', async () => {
    for (const c of children) c.kill('SIGTERM');
    await Promise.all(children.map((c) => c.exited));
    process.exit(0);
  });
  // A child that dies fails the run: the group is one server.
  await Promise.race(children.map((c) => c.exited));
  process.exit(1);
}

const accountId = process.env.BASELINE_ACCOUNT_ID ?? '';
const sql = connect(process.env.DATABASE_URL ?? '', Number(process.env.DATABASE_POOL_SIZE ?? 10));

interface Row {
  email_md5: string;
  email: string;
  attributes: Record<string, unknown>;
  brand_ids: string[];
  enabled: boolean;
  created_at: Date;
}

const md5ToUuid = (md5: string) => md5.toLowerCase().replace(/^(.{8})(.{4})(.{4})(.{4})(.{12})$/, '$1-$2-$3-$4-$5');
const json = (body: unknown, status = 200) => Response.json(body, { status });
const contact = (r: Row) => ({
  email: r.email,
  emailMd5: r.email_md5.replaceAll('-', ''),
  attributes: r.attributes,
  brandIds: r.brand_ids,
  enabled: r.enabled,
  createdAt: r.created_at.toISOString(),
});

async function route(req: Request): Promise<Response> {
  const path = new URL(req.url).pathname;
  if (path === '/healthz') return new Response('ok');
  if (req.method === 'POST' && path === '/v1/contacts') {
    const body = (await req.json()) as { email: string; attributes?: Record<string, unknown> };
    const email = body.email.trim();
    const key = md5ToUuid(createHash('md5').update(email.toLowerCase()).digest('hex'));
    const [row] = await sql<Row[]>`
      insert into contacts (account_id, email_md5, email, attributes, first_source)
      values (${accountId}, ${key}, ${email}, ${sql.json((body.attributes ?? {}) as never)}, 'api')
      returning email_md5, email, attributes, brand_ids, enabled, created_at`;
    return json(contact(row!), 201);
  }
  const m = /^\/v1\/contacts\/([0-9a-fA-F]{32})$/.exec(path);
  if (!m) return json({ code: 'not_found_error' }, 404);
  const key = md5ToUuid(m[1]!);
  if (req.method === 'GET') {
    const [row] = await sql<Row[]>`
      select email_md5, email, attributes, brand_ids, enabled, created_at
      from contacts where account_id = ${accountId} and email_md5 = ${key}`;
    return row ? json(contact(row)) : json({ code: 'not_found_error' }, 404);
  }
  if (req.method === 'PATCH') {
    const body = (await req.json()) as { attributes: Record<string, unknown> };
    const [row] = await sql<Row[]>`
      update contacts
      set attributes = jsonb_strip_nulls(attributes || ${sql.json(body.attributes as never)}), updated_at = now()
      where account_id = ${accountId} and email_md5 = ${key}
      returning email_md5, email, attributes, brand_ids, enabled, created_at`;
    return row ? json(contact(row)) : json({ code: 'not_found_error' }, 404);
  }
  return json({ code: 'invalid_request_error' }, 405);
}

const server = Bun.serve({
  port: Number(process.env.PORT ?? 0),
  hostname: '127.0.0.1',
  reusePort: Boolean(process.env.BASELINE_IN_GROUP),
  fetch: (req) => route(req).catch((e: unknown) => json({ code: 'api_error', detail: String(e) }, 500)),
});
console.log(JSON.stringify({ msg: 'baseline listening', port: server.port }));

process.on('SIGTERM', async () => {
  await server.stop(false);
  await sql.end({ timeout: 5 });
  process.exit(0);
});
