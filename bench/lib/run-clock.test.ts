import { describe, expect, test } from 'bun:test';
import { clock, runEta, timePlan, type PlannedStep, type TimePlanOptions } from './run-clock';
import { shapePaths } from './run-plan';

const DEFAULT_STEPS = ['l1', 'dba', 'pgloader', 'a', 'b', 'http', 'mixed'];
const options = (rows: number, more: Partial<TimePlanOptions> = {}): TimePlanOptions => ({
  rows,
  steps: DEFAULT_STEPS,
  flatRows: 1_000_000,
  duration: 10,
  warmup: 2,
  httpRounds: 3,
  mixedClosed: false,
  mixedShape: 'narrow',
  ...more,
});
const planOf = (o: TimePlanOptions, cached = false) =>
  timePlan(o, shapePaths({ ...o, shapes: ['wide', 'narrow'], citusWorkers: 0 }, '/files'), () => cached);
const total = (plan: PlannedStep[]) => plan.reduce((t, s) => t + s.seconds, 0);

describe('the run plan', () => {
  test('lists the default steps in the order the bench runs them, the narrow shape first', () => {
    const names = planOf(options(1_000_000)).map((s) => (s.shape ? `${s.name} ${s.shape}` : s.name));
    expect(names).toEqual([
      'generate',
      'l1 narrow',
      'dba narrow',
      'pgloader narrow',
      'l1 wide',
      'dba wide',
      'pgloader wide',
      'import A narrow',
      'import B narrow',
      'import A wide',
      'import B wide',
      'http',
      'mixed narrow',
    ]);
  });

  test('generates no file a run before left', () => {
    expect(planOf(options(1_000_000), true).some((s) => s.name === 'generate')).toBe(false);
  });

  test('at 25M runs pgloader on the 1M files and the imports on them too (the flat check)', () => {
    const plan = planOf(options(25_000_000));
    const pgloader = plan.filter((s) => s.name === 'pgloader');
    expect(pgloader.map((s) => s.rows)).toEqual([2_000_000, 2_000_000]);
    expect(plan.filter((s) => s.name === 'flat imports')).toHaveLength(2);
  });

  test('plans the N-process HTTP rows 4 minutes more, and the closed-loop mixed step longer than the open loop', () => {
    const open = total(planOf(options(25_000_000), true));
    expect(total(planOf(options(25_000_000, { httpServers: 5 }), true)) - open).toBeCloseTo(3 * 3 * 2 * 13.5, 0);
    expect(total(planOf(options(25_000_000, { mixedClosed: true }), true))).toBeGreaterThan(open + 40 * 60);
  });

  test("at 1M runs pgloader on the run's own files: the HTTP step and pgloader are most of the run", () => {
    const plan = planOf(options(1_000_000), true);
    const part = total(plan.filter((s) => s.name === 'pgloader' || s.name === 'http')) / total(plan);
    expect(part).toBeGreaterThan(0.5);
  });
});

describe('the ETA', () => {
  const plan: PlannedStep[] = [
    { name: 'one', rows: 0, seconds: 100 },
    { name: 'two', rows: 0, seconds: 200 },
    { name: 'three', rows: 0, seconds: 300 },
  ];

  test('is the plan itself before any step is done', () => {
    expect(runEta(plan, { current: 0, stepElapsed: 0, measured: [] })).toEqual({ remaining: 600, scale: 1 });
    expect(runEta(plan, { current: 0, stepElapsed: 40, measured: [] }).remaining).toBe(560);
  });

  test('scales what is left by the steps done, ten minutes of the plan taken as on time besides', () => {
    // 100 s taken as 200: (200 + 600) / (100 + 600).
    const eta = runEta(plan, { current: 1, stepElapsed: 0, measured: [200] });
    expect(eta.scale).toBeCloseTo(8 / 7, 9);
    expect(eta.remaining).toBeCloseTo((8 / 7) * 500, 6);
  });

  test('a short first step barely moves the ETA; an hour of steps at twice their estimate nearly doubles it', () => {
    const long: PlannedStep[] = [
      { name: 'generate', rows: 0, seconds: 15 },
      { name: 'dba', rows: 0, seconds: 3600 },
      { name: 'rest', rows: 0, seconds: 3600 },
    ];
    expect(runEta(long, { current: 1, stepElapsed: 0, measured: [34] }).scale).toBeLessThan(1.04);
    const late = runEta(long, { current: 2, stepElapsed: 0, measured: [30, 7200] }).scale;
    expect(late).toBeGreaterThan(1.85);
    expect(late).toBeLessThan(2);
  });

  test('holds the scale within 0.25-4 however odd the steps were', () => {
    expect(runEta(plan, { current: 1, stepElapsed: 0, measured: [100_000] }).scale).toBe(4);
    expect(runEta(plan, { current: 2, stepElapsed: 0, measured: [0, 0] }).scale).toBeCloseTo(600 / 900, 9);
    const fast: PlannedStep[] = [{ name: 'slow plan', rows: 0, seconds: 100_000 }, ...plan];
    expect(runEta(fast, { current: 1, stepElapsed: 0, measured: [1] }).scale).toBe(0.25);
  });

  test("takes the current step's own progress once it has overrun its estimate", () => {
    // 300 s into a step of 200 s, a quarter done by its own count: 900 s of it left, then step three.
    const eta = runEta(plan, { current: 1, stepElapsed: 300, fraction: 0.25, measured: [100] });
    expect(eta.remaining).toBe(900 + 300);
  });

  test('a step past its estimate without a progress line still has some time left', () => {
    expect(runEta(plan, { current: 2, stepElapsed: 600, measured: [100, 200] }).remaining).toBe(60);
  });

  test('is 0 past the last step', () => {
    expect(runEta(plan, { current: 3, stepElapsed: 0, measured: [100, 200, 300] }).remaining).toBe(0);
  });
});

test('clock shows h:mm, or h:mm:ss', () => {
  expect(clock(3 * 3600 + 7 * 60 + 31)).toBe('3:07');
  expect(clock(751, true)).toBe('0:12:31');
});
