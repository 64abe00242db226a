/**
 * LISTEN behind one address that moves to a standby (a VIP, a DNS name or a pooler in front of a
 * primary and its standby; src/db/keep-listening.ts). The address is a TCP proxy of the test's,
 * first to the primary of a pair (test/helpers/pg-standby.ts), then moved to the standby while it
 * is still in recovery: the listening sessions break, and the next one lands on the standby, which
 * refuses LISTEN on a session that stays open. postgres.js's own listen() tried that once and gave
 * up; a kept listener tries again on new sessions until the standby is promoted, then listens and
 * receives what is notified on the new primary.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, connect as tcpConnect, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { connect, keepListening, type KeptListener, type Sql } from '../../src/db';
import { freePort } from '../../src/embedded';
import { startPgPair, type PgPair } from '../helpers/pg-standby';
import { until } from '../helpers/fault-import';

const CHANNEL = 'listen_standby_test';

/** A TCP proxy on `port` to 127.0.0.1:`target()`; moveTo() breaks every proxied connection. */
async function movingAddress(port: number, firstTarget: number) {
  let target = firstTarget;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = tcpConnect(target, '127.0.0.1');
    for (const [a, b] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      sockets.add(a);
      a.pipe(b);
      a.on('error', () => b.destroy());
      a.on('close', () => {
        sockets.delete(a);
        b.destroy();
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    moveTo(port: number) {
      target = port;
      for (const s of sockets) s.destroy();
    },
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

let dataDir: string;
let pair: PgPair;
let address: Awaited<ReturnType<typeof movingAddress>>;
let sql: Sql;
let kept: KeptListener | undefined;

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'fault-listen-standby-'));
  pair = await startPgPair(dataDir);
  const port = await freePort();
  address = await movingAddress(port, pair.primary().port);
  sql = connect(`postgres://postgres@127.0.0.1:${port}/contacts`, 1);
});
afterAll(async () => {
  await kept?.end();
  await sql?.end({ timeout: 1 }).catch(() => {});
  await address?.close();
  await pair?.stop();
  await rm(dataDir, { recursive: true, force: true });
});

test('an address moved to a standby: postgres.js gives up, a kept listener listens once it is promoted', async () => {
  const got: string[] = [];
  const plainGot: string[] = [];
  let listens = 0;
  kept = keepListening(
    sql,
    CHANNEL,
    { onNotify: (payload) => got.push(payload), onListen: () => listens++ },
    { what: 'test listener' },
  );
  await sql.listen(CHANNEL, (payload) => plainGot.push(payload));
  await until('the kept listener listening', async () => kept!.listening, 10_000);
  const onPrimary = (fn: (s: postgres.Sql) => Promise<unknown>) => {
    const s = postgres(pair.primary().url, { max: 1, onnotice: () => {} });
    return fn(s).finally(() => s.end({ timeout: 1 }));
  };
  await onPrimary((s) => s`select pg_notify(${CHANNEL}, 'before')`);
  await until(
    'both receive the first NOTIFY',
    async () => got.includes('before') && plainGot.includes('before'),
    5_000,
  );

  const standby = pair.standby()!;
  address.moveTo(standby.port);
  // Both try the standby, which refuses LISTEN while in recovery; the kept one keeps trying.
  await Bun.sleep(3_000);
  expect(kept.listening).toBe(false);
  const { promoted } = await pair.failover();
  expect(promoted.port).toBe(standby.port);
  await until('the kept listener listening on the promoted server', async () => kept!.listening, 20_000);
  expect(listens).toBe(2);
  await onPrimary((s) => s`select pg_notify(${CHANNEL}, 'after')`);
  await until('the kept listener receives the NOTIFY on the promoted server', async () => got.includes('after'), 5_000);
  expect(got).toEqual(['before', 'after']);
  // postgres.js's listen() met the refusal on a session that stayed open, and never tried again.
  await Bun.sleep(1_000);
  expect(plainGot).toEqual(['before']);
}, 90_000);
