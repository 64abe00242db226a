/**
 * LISTEN through a PostgreSQL restart longer than a moment, behind a single host name (src/db/
 * keep-listening.ts): a listener of the service keeps trying until it listens again, runs its
 * catch-up, logs the loss and the return once each, and receives what is notified from then on. The
 * server is stopped (immediate) for 3 s, long past postgres.js's first re-listen, then started on
 * the same port.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { connect, keepListening, type KeptListener, type Sql } from '../../src/db';
import { faultBed, type Child, type FaultBed } from '../helpers/fault-bed';
import { until } from '../helpers/fault-import';
import { createAccount, createKey } from '../helpers/fixtures';

const CHANNEL = 'keep_listening_test';
const PLAIN = 'plain_listen_test';
const DOWN_MS = 3_000;

describe('LISTEN through a PostgreSQL restart', () => {
  let bed: FaultBed;
  let sql: Sql;
  let kept: KeptListener | undefined;
  let api: Child;
  let key: string;

  beforeAll(async () => {
    bed = await faultBed();
    sql = connect(bed.databaseUrl, 2);
    key = await createKey(bed.sql, await createAccount(bed.sql));
    api = await bed.start('api', { APP_NAME: 'listen-api' });
  });
  afterAll(async () => {
    await kept?.end();
    await sql?.end({ timeout: 1 }).catch(() => {});
    await bed?.stop();
  });

  const notify = (channel: string, payload: string) => bed.sql`select pg_notify(${channel}, ${payload})`;
  /** The API's cache invalidation listener's backend, if it listens. */
  const apiListenerPid = async () =>
    (
      await bed.sql<{ pid: number }[]>`
        select pid from pg_stat_activity
        where application_name = 'listen-api' and query ilike 'listen%cache_invalidation%'`
    )[0]?.pid;

  test('listens again, catches up and gets a NOTIFY sent after the restart; so does the API', async () => {
    const got: string[] = [];
    const plainGot: string[] = [];
    let listens = 0;
    kept = keepListening(
      sql,
      CHANNEL,
      { onNotify: (payload) => got.push(payload), onListen: () => listens++ },
      { what: 'test listener' },
    );
    // For comparison (printed, not asserted): postgres.js's own listen() on the same server.
    await sql.listen(PLAIN, (payload) => plainGot.push(payload));
    await until('the kept listener listening', async () => kept!.listening, 10_000);
    expect(listens).toBe(1);
    // The API starts its listener on its first /v1 request.
    const res = await fetch(`${api.url}/v1/brands`, { headers: { authorization: `Bearer ${key}` } });
    expect(res.status).toBe(200);
    const apiBefore = await until('the API listening', apiListenerPid, 10_000);

    await notify(CHANNEL, 'before');
    await notify(PLAIN, 'before');
    await until(
      'both receive a NOTIFY before the restart',
      async () => got.includes('before') && plainGot.includes('before'),
      5_000,
    );

    await bed.stopPostgres();
    await Bun.sleep(100);
    expect(kept.listening).toBe(false);
    await Bun.sleep(DOWN_MS);
    await bed.startPostgres();
    const started = Date.now();

    await until('the kept listener listening again', async () => kept!.listening, 20_000);
    const relistenMs = Date.now() - started;
    // The catch-up ran once more, for the notifications missed while nobody listened.
    expect(listens).toBe(2);
    await notify(CHANNEL, 'after');
    await notify(PLAIN, 'after');
    await until(
      'the kept listener receives the NOTIFY sent after the restart',
      async () => got.includes('after'),
      5_000,
    );
    expect(got).toEqual(['before', 'after']);

    // The API's cache listener is the same helper: a new backend listens, with no request to wake it.
    const apiAfter = await until(
      'the API listening again',
      async () => {
        const pid = await apiListenerPid();
        return pid !== undefined && pid !== apiBefore && pid;
      },
      20_000,
    );
    expect(apiAfter).not.toBe(apiBefore);
    const apiLog = await Bun.file(api.log).text();
    // Once when lost and once when back, not once per attempt.
    expect(apiLog.match(/cache invalidation listener: lost its LISTEN connection/g)).toHaveLength(1);
    expect(apiLog.match(/cache invalidation listener: listening again/g)).toHaveLength(1);

    console.log(JSON.stringify({ downMs: DOWN_MS, relistenMs, plainListenReceivedAfter: plainGot.includes('after') }));
  }, 60_000);
});
