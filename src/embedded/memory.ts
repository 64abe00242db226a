import { totalmem } from 'node:os';

/** Memory settings of one embedded PostgreSQL node. */
export interface MemorySettings {
  shared_buffers: string;
  work_mem: string;
  maintenance_work_mem: string;
}

const clampMb = (mb: number, min: number, max: number) => `${Math.max(min, Math.min(max, Math.floor(mb)))}MB`;

/**
 * The memory settings of an embedded PostgreSQL node that shares this machine's memory with
 * `nodes - 1` others (a Citus coordinator and its workers): the one sizing rule of both the single
 * node (postgres.ts) and the cluster (citus.ts). On the 24 GB machines the bench runs on, one node
 * gets what it was measured best with: 1 GB of shared buffers (6 GB made import A of 5M rows 17 %
 * slower: bench/findings/2026-11-25-flat-cost-first-probe-5m.md; the OS page cache holds the
 * rest), 64 MB per sort or hash
 * node and ~1 GB for index builds. A smaller machine gets less of each instead of a server that can
 * take more memory than there is: shared buffers an eighth of it (at least 128 MB), work_mem a
 * 256th (at least 4 MB: max_connections backends may each run sorts at once), maintenance a 24th
 * (at least 64 MB).
 */
export function memorySettings(nodes = 1, totalBytes = totalmem()): MemorySettings {
  const mb = totalBytes / 2 ** 20 / nodes;
  return {
    shared_buffers: clampMb(mb / 8, 128, 1024),
    work_mem: clampMb(mb / 256, 4, 64),
    maintenance_work_mem: clampMb(mb / 24, 64, 1024),
  };
}
