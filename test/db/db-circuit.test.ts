// The circuit's state machine (src/db/circuit.ts) with a probe the test answers; the real thing
// against a stopped PostgreSQL is test/faults/fault-postgres-circuit.test.ts.
import { describe, expect, test } from 'bun:test';
import { DatabaseCircuit, isDatabaseUnavailable } from '../../src/db';

const refused = () => Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
const lostSession = () => Object.assign(new Error('write CONNECTION_CLOSED'), { code: 'CONNECTION_CLOSED' });

/** A circuit whose probe answers as `answers` says, counting its calls. */
function circuit(answers: () => Promise<unknown>) {
  const probe = { calls: 0 };
  const c = new DatabaseCircuit(() => {
    probe.calls++;
    return answers();
  });
  return { c, probe };
}

/** How admit() answered: undefined (go ahead at once) counts as admitted. */
const refusal = (p: Promise<unknown> | undefined) =>
  Promise.resolve(p).then(
    () => 'admitted',
    (e: unknown) => (isDatabaseUnavailable(e) ? (e as { code: string }).code : `other: ${String(e)}`),
  );

describe('the database circuit', () => {
  test('closed: requests go ahead without a probe', async () => {
    const { c, probe } = circuit(() => Promise.reject(refused()));
    expect(await refusal(c.admit())).toBe('admitted');
    expect(probe.calls).toBe(0);
  });

  test('a failure that is not about the database starts no probe', async () => {
    const { c, probe } = circuit(() => Promise.resolve());
    c.failed(new TypeError('boom'));
    expect(probe.calls).toBe(0);
  });

  test('a database failure whose probe fails opens it; requests are refused as the database away', async () => {
    const { c, probe } = circuit(() => Promise.reject(refused()));
    c.failed(refused());
    await c.check();
    expect(c.isOpen).toBe(true);
    expect(await refusal(c.admit())).toBe('DATABASE_UNREACHABLE');
    // Right after a failed probe, a request is refused on its word, without probing again.
    const before = probe.calls;
    expect(await refusal(c.admit())).toBe('DATABASE_UNREACHABLE');
    expect(probe.calls).toBe(before);
  });

  test('a database failure whose probe answers leaves it closed', async () => {
    const { c } = circuit(() => Promise.resolve());
    c.failed(lostSession());
    expect(await c.check()).toBe(true);
    expect(c.isOpen).toBe(false);
  });

  test('open: the first request after the database is back goes ahead, and closes it', async () => {
    let up = false;
    const { c } = circuit(() => (up ? Promise.resolve() : Promise.reject(refused())));
    await c.check();
    expect(c.isOpen).toBe(true);
    up = true;
    await Bun.sleep(150); // past the gap between probes
    expect(await refusal(c.admit())).toBe('admitted');
    expect(c.isOpen).toBe(false);
  });

  test('open: a probe that does not answer refuses the request within 1 s', async () => {
    let hang = false;
    const { c } = circuit(() => (hang ? new Promise(() => {}) : Promise.reject(refused())));
    await c.check();
    hang = true;
    await Bun.sleep(150);
    const started = performance.now();
    expect(await refusal(c.admit())).toBe('DATABASE_UNREACHABLE');
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  test("the probe's own lost session is tried once more before it counts", async () => {
    let calls = 0;
    const { c } = circuit(() => (calls++ === 0 ? Promise.reject(lostSession()) : Promise.resolve()));
    expect(await c.check()).toBe(true);
    expect(calls).toBe(2);
  });

  test('after close(), closing pool connections start no probe', async () => {
    const { c, probe } = circuit(() => Promise.resolve());
    c.close();
    c.suspect();
    expect(probe.calls).toBe(0);
  });
});
