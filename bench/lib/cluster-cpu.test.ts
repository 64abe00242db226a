// Issue 40's request figure as the bench judges it: the database's CPU per request summed over every
// node of the cluster, through the cheapest of its APIs, against the single node's PostgreSQL.
import { describe, expect, test } from 'bun:test';
import type { DatabaseRun } from '../steps/citus';
import { clusterCpuTargets } from './report';
import type { HttpRow } from './types';

const row = (scenario: string, target: HttpRow['target'], cpu: Record<string, number>): HttpRow => ({
  scenario,
  target,
  reqPerSec: 1_000,
  p50: 1,
  p99: 2,
  non2xx: 0,
  errors: 0,
  cpuMsPerRequest: cpu,
});

const single: DatabaseRun = {
  label: 'single node',
  http: [
    row('GET', 'baseline', { postgres: 0.01, baseline: 0.05 }),
    row('GET', 'api', { postgres: 0.05, api: 0.1, importer: 0.01 }),
    row('POST', 'api', { postgres: 0.2, api: 0.2 }),
  ],
};

describe('clusterCpuTargets', () => {
  test('sums every node (not the API, the worker or the baseline) and judges the cheapest API of each kind', () => {
    const cluster: DatabaseRun = {
      label: 'citus 1+2',
      http: [
        // The bare server is no API: never the cheapest, however little it costs.
        row('GET', 'baseline', { coordinator: 0.001, 'worker-1': 0.001 }),
        row('GET', 'api', { coordinator: 0.3, 'worker-1': 0.2, 'worker-2': 0.05, api: 0.2 }),
        row('GET', 'api-on-worker-1', {
          coordinator: 0.01,
          'worker-1': 0.07,
          'worker-2': 0.01,
          'api-on-worker-1': 0.5,
        }),
        row('GET', 'api-on-worker-2', { coordinator: 0.01, 'worker-1': 0.2, 'worker-2': 0.2 }),
        row('POST', 'api', { coordinator: 1, 'worker-1': 1 }),
        row('POST', 'api-on-worker-1', { coordinator: 0.1, 'worker-1': 0.5, importer: 3 }),
      ],
    };
    const [get, post, ...rest] = clusterCpuTargets(single, cluster);
    expect(rest).toEqual([]); // no PATCH measured on either: nothing judged
    expect(get).toMatchObject({ value: '1.80 x', target: '<= 2 x', pass: true });
    expect(get!.name).toContain('via api-on-worker-1');
    expect(post).toMatchObject({ value: '3.00 x', pass: false });
    expect(post!.name).toContain('via api-on-worker-1');
  });

  test('without a cluster run, nothing to judge', () => {
    expect(clusterCpuTargets(single, undefined)).toEqual([]);
  });
});
