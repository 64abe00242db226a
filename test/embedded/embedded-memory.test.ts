// The embedded PostgreSQL's memory settings, sized from the machine's memory (src/embedded/memory.ts).
import { expect, test } from 'bun:test';
import { memorySettings } from '../../src/embedded/memory';

const GB = 2 ** 30;

// [why, nodes on the machine, its memory, shared_buffers, work_mem, maintenance_work_mem]
const cases: [string, number, number, string, string, string][] = [
  ['one node of a 24 GB machine: what the bench measured best', 1, 24 * GB, '1024MB', '64MB', '1024MB'],
  ['one node of a 4 GB machine: less of each', 1, 4 * GB, '512MB', '16MB', '170MB'],
  ['one node of 512 MB: the floors', 1, GB / 2, '128MB', '4MB', '64MB'],
  ['a Citus coordinator and two workers on 24 GB share it', 3, 24 * GB, '1024MB', '32MB', '341MB'],
  ['a Citus coordinator and two workers on 6 GB share it', 3, 6 * GB, '256MB', '8MB', '85MB'],
];

for (const [why, nodes, memory, sharedBuffers, workMem, maintenance] of cases) {
  test(why, () => {
    expect(memorySettings(nodes, memory)).toEqual({
      shared_buffers: sharedBuffers,
      work_mem: workMem,
      maintenance_work_mem: maintenance,
    });
  });
}
