/**
 * Probe: what receiving a large body into the local object store (src/storage/local.ts) does to
 * PostgreSQL's commits on the same disk. Single-row autocommit inserts on `--writers` connections,
 * each commit's time recorded; `--before` seconds of them alone, then a body of `--mb` MB received
 * and committed as an upload is (receive, then commit: the store's fsyncs), then `--after` seconds.
 * Prints the commits' p50 / p99 / max in each span and each second of the body's. Run it on the
 * embedded services of a DATA_DIR no other run uses:
 *
 *   DATA_DIR=/tmp/probe bun bench/probes/store-sync.ts --mb 2000
 */
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { LocalStore } from '../../src/storage/local';
import { UploadTokens } from '../../src/storage/upload-token';
import { startInfra } from '../lib/services';

const { values } = parseArgs({
  options: {
    mb: { type: 'string', default: '2000' },
    writers: { type: 'string', default: '4' },
    before: { type: 'string', default: '5' },
    after: { type: 'string', default: '5' },
  },
});
const mb = Number(values.mb);
const writers = Number(values.writers);

const infra = await startInfra(() => {});
const store = new LocalStore(
  join(infra.config.dataDir, 'probe-store'),
  'http://unused',
  new UploadTokens(randomBytes(32)),
);
/** [ms since start the commit was sent, its ms] */
const commits: [number, number][] = [];
const t0 = performance.now();
let stop = false;
try {
  await infra.sql`create table if not exists probe_commits (id bigserial primary key, at timestamptz default now())`;
  const loops = Array.from({ length: writers }, async () => {
    while (!stop) {
      const sent = performance.now();
      await infra.sql`insert into probe_commits default values`;
      commits.push([sent - t0, performance.now() - sent]);
    }
  });
  const spans: { name: string; from: number; to: number }[] = [];
  const span = async (name: string, work: () => Promise<void>) => {
    const from = performance.now() - t0;
    await work();
    spans.push({ name, from, to: performance.now() - t0 });
  };
  await span('before', () => Bun.sleep(Number(values.before) * 1000));
  await span('body', async () => {
    const chunk = randomBytes(1 << 20);
    async function* body() {
      for (let i = 0; i < mb; i++) yield chunk;
    }
    const received = await store.receive('probe/body', body(), Infinity);
    await store.commit('probe/body', received);
  });
  await span('after', () => Bun.sleep(Number(values.after) * 1000));
  stop = true;
  await Promise.all(loops);

  const quantiles = (ms: number[]) => {
    const s = ms.sort((a, b) => a - b);
    const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? NaN;
    const cells = [at(0.5).toFixed(2), at(0.99).toFixed(2), (s.at(-1) ?? NaN).toFixed(1)];
    return [String(s.length).padStart(7), ...cells.map((c) => c.padStart(8))].join(' ');
  };
  const within = (from: number, to: number) => commits.filter(([at]) => at >= from && at < to).map(([, ms]) => ms);
  console.log(`body ${mb} MB, ${writers} writers; commits sent in each span: count, p50 ms, p99 ms, max ms`);
  for (const s of spans)
    console.log(
      `${s.name.padEnd(10)} ${((s.to - s.from) / 1000).toFixed(1).padStart(6)} s ${quantiles(within(s.from, s.to))}`,
    );
  const body = spans.find((s) => s.name === 'body')!;
  for (let at = body.from; at < body.to; at += 1000)
    console.log(`  body +${((at - body.from) / 1000).toFixed(0).padStart(3)} s   ${quantiles(within(at, at + 1000))}`);
} finally {
  stop = true;
  await infra.sql`drop table if exists probe_commits`.catch(() => {});
  await store.remove('probe/body').catch(() => {});
  await rm(join(infra.config.dataDir, 'probe-store'), { recursive: true, force: true });
  await infra.stop();
}
