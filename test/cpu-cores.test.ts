/**
 * The default of API_PROCESSES (src/cpu-cores.ts): the machine's cores, lowered to a container's
 * CPU quota (cgroup v2 or v1), and each group process's part of DATABASE_POOL_SIZE (src/db/pool.ts).
 */
import { describe, expect, test } from 'bun:test';
import { availableParallelism } from 'node:os';
import { availableCores, cgroupQuota } from '../src/cpu-cores';
import { apiPoolSize } from '../src/db';

const files = (map: Record<string, string>) => (path: string) => map[path];

describe('cgroupQuota', () => {
  test('cgroup v2 cpu.max: quota over period, none for max', () => {
    expect(cgroupQuota(files({ '/sys/fs/cgroup/cpu.max': '150000 100000\n' }))).toBe(1.5);
    expect(cgroupQuota(files({ '/sys/fs/cgroup/cpu.max': 'max 100000\n' }))).toBeUndefined();
  });
  test('cgroup v1 cfs quota over period, none for -1 or no files', () => {
    const v1 = (quota: string) =>
      files({ '/sys/fs/cgroup/cpu/cpu.cfs_quota_us': quota, '/sys/fs/cgroup/cpu/cpu.cfs_period_us': '100000' });
    expect(cgroupQuota(v1('300000'))).toBe(3);
    expect(cgroupQuota(v1('-1'))).toBeUndefined();
    expect(cgroupQuota(files({}))).toBeUndefined();
  });
});

describe('availableCores', () => {
  test('the machine cores without a quota, a quota rounded up below them, never under 1', () => {
    expect(availableCores(files({}))).toBe(availableParallelism());
    expect(availableCores(files({ '/sys/fs/cgroup/cpu.max': '50000 100000' }))).toBe(1);
    expect(availableCores(files({ '/sys/fs/cgroup/cpu.max': '1000 100000' }))).toBe(1);
    expect(availableCores(files({ '/sys/fs/cgroup/cpu.max': '6400000 100000' }))).toBe(availableParallelism());
  });
});

describe('apiPoolSize', () => {
  test('an API alone takes DATABASE_POOL_SIZE; a group process its part, at least 2', () => {
    expect(apiPoolSize({ databasePoolSize: 10, apiProcesses: 4, apiProcessIndex: undefined })).toBe(10);
    expect(apiPoolSize({ databasePoolSize: 10, apiProcesses: 2, apiProcessIndex: 1 })).toBe(5);
    expect(apiPoolSize({ databasePoolSize: 10, apiProcesses: 3, apiProcessIndex: 0 })).toBe(3);
    expect(apiPoolSize({ databasePoolSize: 10, apiProcesses: 16, apiProcessIndex: 0 })).toBe(2);
  });
});
