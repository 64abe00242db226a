// The embedded PostgreSQL's memory settings, sized from the machine's memory (src/embedded/memory.ts).
import { expect, test } from 'bun:test';
import { memorySettings } from '../src/embedded/memory';

const GB = 2 ** 30;

test('one node of a 24 GB machine gets the settings the bench measured best', () => {
  expect(memorySettings(1, 24 * GB)).toEqual({
    shared_buffers: '1024MB',
    work_mem: '64MB',
    maintenance_work_mem: '1024MB',
  });
});

test('a smaller machine gets less of each, never below the floors', () => {
  expect(memorySettings(1, 4 * GB)).toEqual({
    shared_buffers: '512MB',
    work_mem: '16MB',
    maintenance_work_mem: '170MB',
  });
  expect(memorySettings(1, 512 * 2 ** 20)).toEqual({
    shared_buffers: '128MB',
    work_mem: '4MB',
    maintenance_work_mem: '64MB',
  });
});

test('nodes of one machine (a Citus coordinator and two workers) share its memory', () => {
  expect(memorySettings(3, 24 * GB)).toEqual({
    shared_buffers: '1024MB',
    work_mem: '32MB',
    maintenance_work_mem: '341MB',
  });
  expect(memorySettings(3, 6 * GB)).toEqual({
    shared_buffers: '256MB',
    work_mem: '8MB',
    maintenance_work_mem: '85MB',
  });
});
