// Retry-After while an import is stalled or resuming (issue "Hardening", build 5; DESIGN: "Retry-After
// is an honest estimate"). A merge whose worker was killed moves neither its estimated end nor its
// checkpoint: the refused write must hear the time until the job is picked up again plus the rest
// of the merge, not the 1 s of an estimate that has passed.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { STALLED_CHECK_MS, STALLED_RESUME_MS, SWEEP_EVERY_MS } from '../../src/imports/jobs';
import { retryAfterSeconds } from '../../src/imports/retry-after';
import { expectProblem, testApp, type TestApp } from '../helpers/app';

let t: TestApp;
beforeAll(async () => {
  t = await testApp();
});
afterAll(() => t.close());

const RESUME_S = STALLED_RESUME_MS / 1000;
const CHECK_S = STALLED_CHECK_MS / 1000;
/** The work an import past its size estimate is still given: one sweep interval. */
const SWEEP_S = SWEEP_EVERY_MS / 1000;

/**
 * A merging import of the account, as the worker leaves it: `checkpoint` of `rowCount` rows merged
 * in the `activeSeconds` after its bulk_operations row was made, the last batch `quietSeconds`
 * ago, the estimated end `overdueSeconds` in the past.
 */
async function merging(o: {
  checkpoint: number;
  rowCount: number;
  activeSeconds: number;
  quietSeconds: number;
  overdueSeconds: number;
}) {
  const [row] = await t.db.sql<{ id: string }[]>`
    insert into contact_imports (account_id, status, method, columns, duplicate_contact_strategy, updated_count,
                                 skipped_count, phase, checkpoint, row_count, percent_complete, started_at, updated_at)
    values (${t.accountId}, 'importing', 'api', '{Email}', 'overwrite', 0, 0, 'merge', ${o.checkpoint}, ${o.rowCount},
            ${Math.floor((100 * o.checkpoint) / o.rowCount)}, now() - interval '1 hour',
            now() - make_interval(secs => ${o.quietSeconds}))
    returning id`;
  await t.db.sql`
    insert into bulk_operations (account_id, id, kind, started_at, estimated_end)
    values (${t.accountId}, ${row!.id}, 'contact-import',
            now() - make_interval(secs => ${o.quietSeconds + o.activeSeconds}),
            now() - make_interval(secs => ${o.overdueSeconds}))`;
  return async () => {
    await t.db.sql`delete from bulk_operations where account_id = ${t.accountId}`;
    await t.db.sql`delete from contact_imports where account_id = ${t.accountId}`;
  };
}

async function refusedWriteRetryAfter(): Promise<number> {
  const res = await t.call('POST', '/v1/contacts', { body: { email: `stalled.${crypto.randomUUID()}@example.com` } });
  expectProblem(res, 409, 'operation_in_progress');
  return Number(res.headers.get('retry-after'));
}

describe('a single contact write refused while an import merges', () => {
  test(
    'past its estimate, 2 s after its last batch: the time until a stalled job is picked up again ' +
      'plus the rest of the merge at its own speed',
    async () => {
      // 20,000 rows in 10 s: 2,000 rows a second, 80,000 rows (40 s) to go.
      const end = await merging({
        checkpoint: 20_000,
        rowCount: 100_000,
        activeSeconds: 10,
        quietSeconds: 2,
        overdueSeconds: 1,
      });
      try {
        const expected = RESUME_S - 2 + 40;
        const got = await refusedWriteRetryAfter();
        expect(got).toBeGreaterThanOrEqual(expected - 1);
        expect(got).toBeLessThanOrEqual(expected + 1);
      } finally {
        await end();
      }
    },
  );

  test('quiet longer than a stalled job waits: the rest of the merge, at least one stalled-job check', async () => {
    const end = await merging({
      checkpoint: 20_000,
      rowCount: 100_000,
      activeSeconds: 10,
      quietSeconds: 600,
      overdueSeconds: 590,
    });
    try {
      expect(await refusedWriteRetryAfter()).toBe(40);
    } finally {
      await end();
    }
    const last = await merging({
      checkpoint: 99_900,
      rowCount: 100_000,
      activeSeconds: 10,
      quietSeconds: 600,
      overdueSeconds: 590,
    });
    try {
      expect(await refusedWriteRetryAfter()).toBe(CHECK_S);
    } finally {
      await last();
    }
  });

  test('while its estimate is ahead, the estimate', async () => {
    const end = await merging({
      checkpoint: 20_000,
      rowCount: 100_000,
      activeSeconds: 10,
      quietSeconds: 1,
      overdueSeconds: -30,
    });
    try {
      const got = await refusedWriteRetryAfter();
      expect(got).toBeGreaterThanOrEqual(29);
      expect(got).toBeLessThanOrEqual(30);
    } finally {
      await end();
    }
  });
});

describe('the one-open-import 409 of an import past its estimate', () => {
  const now = new Date('2026-01-01T12:00:00Z');
  const ago = (s: number) => new Date(now.getTime() - s * 1000);
  const reading = {
    status: 'importing' as const,
    created_at: ago(3600),
    started_at: ago(600),
    object_size: 1024,
    percent_complete: 0,
  };

  test('just quiet: the wait for a stalled job to be picked up again, then a sweep interval of work', () => {
    expect(retryAfterSeconds({ ...reading, updated_at: ago(5) }, now)).toBe(RESUME_S - 5 + SWEEP_S);
  });

  test('without a last-progress time it assumes the worker has just died', () => {
    expect(retryAfterSeconds({ ...reading, updated_at: null }, now)).toBe(RESUME_S + SWEEP_S);
  });

  test('long quiet: at least one stalled-job check', () => {
    expect(retryAfterSeconds({ ...reading, updated_at: ago(600) }, now)).toBe(CHECK_S);
  });
});
