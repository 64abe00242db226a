/**
 * The chaos soak in CI's shape (issues 39 and 58): one `npm start` stack on its own PostgreSQL
 * primary and standby, Redis and S3 store, three accounts importing overlapping 10,000-row files in
 * a loop (overwrite, malformed and repeated rows, batches of 2,000) while each account's client
 * creates, patches and reads contacts, and a seeded fault every 6–10 s for about 2.5 minutes:
 * worker kill -9, API kill -9, PostgreSQL restart -m immediate, pg_terminate_backend of the
 * service's connections, Redis kill -9 restarted empty, a failover (and the standby rebuilt),
 * PostgreSQL's disk full for 6-10 s, the object store failing 30% of the service's requests for
 * 6-10 s. Then the files again into fresh accounts with no fault. Needs root (loop mounts). The
 * full ten minutes: `bun scripts/soak.ts` (same code, test/helpers/soak/).
 */
import { expect, test } from 'bun:test';
import { FAULT_KINDS } from '../helpers/soak/faults';
import { runSoak } from '../helpers/soak/run';

const NAME =
  'a stack under faults ends every import and write like a fault-free run, with no stray 5xx and no unexpected exit';

test(
  NAME,
  async () => {
    const r = await runSoak({
      seed: 1,
      durationMs: 140_000,
      faultEvery: [6_000, 10_000],
      maxFaults: 20,
      faultHold: [6_000, 10_000],
      rows: 10_000,
      accounts: 3,
      batchSize: 2_000,
      importPause: [3_000, 8_000],
      drainMs: 30_000,
      replayMs: 90_000,
      traffic: { lanes: 2, contactsPerLane: 40, pause: [10, 40] },
      say: (line) => console.log(line),
    });
    const kinds = new Set(r.state.faults.map((f) => f.kind));
    expect(FAULT_KINDS.filter((k) => !kinds.has(k))).toEqual([]);
    expect(r.runs.length).toBeGreaterThan(0);
    expect(r.runs.filter((i) => i.final.status !== 'success')).toEqual([]);
    // Everything else the soak judged (replay counts, contacts, stray 5xx, error bodies, exits, health), by name.
    expect(r.failures).toEqual([]);
  },
  // The soak's own deadlines end it within about 6 minutes whatever happens (its finally tears the stack down).
  420_000,
);
