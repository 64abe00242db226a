/**
 * An export's COPY while the API is busy (worker/exports/copy-rows.ts): read at 1 / (1 + EXPORT_PACE)
 * of the rate it reached while the API was not, and still one whole file.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { setLogLevel } from '../../src/log';
import { EXPORT_PACE, PacedRate } from '../../worker/exports/copy-rows';
import { runNextExport } from '../../worker/exports/loop';
import { testApp, type TestApp } from '../helpers/app';
import { createAttribute } from '../helpers/fixtures';
import { tempStore } from '../helpers/file-store';

describe('PacedRate', () => {
  const MB = 1 << 20;
  function clocked() {
    let t = 0;
    const rate = new PacedRate(() => t);
    return { rate, at: (ms: number) => (t = ms) };
  }

  test('the first stretch runs free, even while the API is busy: there is no rate to hold yet', () => {
    const { rate, at } = clocked();
    at(10);
    expect(rate.batch(MB, true)).toBe(0);
  });

  test('while busy, the rate of the last free stretch is held at 1 / (1 + EXPORT_PACE)', () => {
    const { rate, at } = clocked();
    // 100 MB/s free for a second.
    for (let ms = 10; ms <= 1000; ms += 10) {
      at(ms);
      expect(rate.batch(MB, false)).toBe(0);
    }
    at(1000);
    expect(rate.batch(MB, true)).toBe(Math.round((1000 * (1 + EXPORT_PACE)) / 100));
    // A COPY already slower than the held rate is never held.
    at(2000);
    expect(rate.batch(MB, true)).toBe(0);
    // Free again at once when the API is no longer busy.
    at(2001);
    expect(rate.batch(MB, false)).toBe(0);
  });
});

describe('an export while the API is busy', () => {
  let t: TestApp;
  let files: Awaited<ReturnType<typeof tempStore>>;
  const ROWS = 60_000;

  beforeAll(async () => {
    setLogLevel('warn');
    files = await tempStore();
    t = await testApp({ storage: files.store } as never);
    await createAttribute(t.db.sql, t.accountId, 'text', 'string');
    await t.db.sql`
      insert into contacts (account_id, email_md5, email, attributes, first_source)
      select ${t.accountId}, md5('p' || i || '@example.com')::uuid, 'p' || i || '@example.com',
        jsonb_build_object('text', repeat('y', 200) || i), 'import'
      from generate_series(1, ${ROWS}) i`;
  });
  afterAll(async () => {
    await t.close();
    await files.remove();
  });

  test('is paced and still ends with one whole file', async () => {
    const created = await t.call('POST', '/v1/contact-exports', { body: {} });
    expect(created.status).toBe(202);
    expect(await runNextExport(t.db.sql, files.store, crypto.randomUUID(), 7, () => true)).toBe('success');
    const e = (await t.call('GET', `/v1/contact-exports/${created.body.id}`)).body;
    expect(e.rowCount).toBe(ROWS);
    const res = await t.app.handle(new Request(`http://localhost${new URL(e.downloadUrl).pathname}`));
    const lines = (await res.text()).split('\n');
    expect(lines[0]).toBe('Email,Brand,text');
    expect(lines.length).toBe(ROWS + 2); // header, rows, the final newline
    expect(new Set(lines.slice(1, -1).map((l) => l.slice(0, l.indexOf(',')))).size).toBe(ROWS);
  }, 60_000);
});
