/**
 * The chaos soak of issue 39 at full size, from the command line (CI runs a short shape of it,
 * test/faults/chaos-soak.test.ts): `bun scripts/soak.ts [--minutes 10] [--seed 1] [--rows 100000]
 * [--accounts 3] [--every 20-40] [--batch 100000]`. Needs PostgreSQL binaries, redis-server and
 * root (the tables' disks are loop mounts); it makes its own primary and standby, Redis and S3
 * store (s3rver behind the fault proxy) under a temp dir and runs the stack as `npm start` does.
 * Prints the fault log and a last line; exit code 0 only when every check passed.
 */
import { parseArgs } from 'node:util';
import { runSoak } from '../test/helpers/soak/run';

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '10' },
    seed: { type: 'string', default: '1' },
    rows: { type: 'string', default: '100000' },
    accounts: { type: 'string', default: '3' },
    every: { type: 'string', default: '20-40' },
    batch: { type: 'string', default: '100000' },
  },
});
const num = (name: keyof typeof values) => {
  const v = Number(values[name]);
  if (!Number.isFinite(v) || v <= 0) {
    console.error(`--${name} must be a positive number, got "${values[name]}"`);
    process.exit(2);
  }
  return v;
};
const [lo, hi] = String(values.every)
  .split('-')
  .map((s) => Number(s) * 1000);
if (!(lo! > 0 && hi! >= lo!)) {
  console.error(`--every must be MIN-MAX seconds, got "${values.every}"`);
  process.exit(2);
}

const minutes = num('minutes');
// Ctrl-C ends the loops early; the soak then tears down its stack, PostgreSQL and Redis itself.
const stopped = new AbortController();
process.on('SIGINT', () => stopped.abort());
process.on('SIGTERM', () => stopped.abort());
const r = await runSoak({
  seed: num('seed'),
  durationMs: minutes * 60_000,
  faultEvery: [lo!, hi!],
  maxFaults: Math.ceil((minutes * 60_000) / lo!) + 1,
  faultHold: [10_000, 20_000],
  rows: num('rows'),
  accounts: num('accounts'),
  batchSize: num('batch'),
  importPause: [0, 0],
  drainMs: 10 * 60_000,
  replayMs: 30 * 60_000,
  signal: stopped.signal,
  traffic: { lanes: 3, contactsPerLane: 100, pause: [5, 25] },
  say: (line) => console.log(line),
}).catch((e) => {
  console.error(`soak: ${e instanceof Error ? e.message : e}`);
  process.exit(1);
});
process.exit(r.passed ? 0 : 1);
