import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';

/**
 * The cores this process may use: the machine's (or its CPU affinity's), lowered to the container's
 * CPU quota when there is one (cgroup v2 `cpu.max`, or v1 `cpu.cfs_quota_us` over
 * `cpu.cfs_period_us`), rounded up, at least 1. A container limited to 1.5 CPUs of a 64-core host
 * gets 2, not 64: more API processes than the quota only share its time slices.
 */
export function availableCores(read: (path: string) => string | undefined = readOrUndefined): number {
  const cores = availableParallelism();
  const quota = cgroupQuota(read);
  return Math.max(1, quota === undefined ? cores : Math.min(cores, Math.ceil(quota)));
}

/** CPUs the cgroup allows (quota over period), or undefined when it sets no limit or there is none. */
export function cgroupQuota(read: (path: string) => string | undefined): number | undefined {
  const v2 = read('/sys/fs/cgroup/cpu.max')?.trim().split(/\s+/);
  if (v2 && v2[0] !== 'max') return ratio(Number(v2[0]), Number(v2[1] ?? 100_000));
  if (v2) return undefined;
  const quota = Number(read('/sys/fs/cgroup/cpu/cpu.cfs_quota_us')?.trim());
  const period = Number(read('/sys/fs/cgroup/cpu/cpu.cfs_period_us')?.trim());
  return quota > 0 ? ratio(quota, period) : undefined;
}

function ratio(quota: number, period: number): number | undefined {
  return quota > 0 && period > 0 ? quota / period : undefined;
}

function readOrUndefined(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}
