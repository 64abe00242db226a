/**
 * The one rule for a full disk (src/storage/disk-full.ts) and what an import's wait for space ends
 * with when the space never comes (worker/import/disk-full-wait.ts): the failure reason the queue's
 * last retry records names the disk.
 */
import { describe, expect, test } from 'bun:test';
import { diskFullCause, isDiskFull } from '../../src/storage/disk-full';
import { DISK_FULL_WAIT_MS, diskFullWait } from '../../worker/import/disk-full-wait';

const pgFull = Object.assign(new Error('could not extend file "base/16384/24576": No space left on device'), {
  code: '53100',
});
const fileFull = Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });

describe('a full disk', () => {
  test("is PostgreSQL's 53100 disk_full or a write's ENOSPC or EDQUOT, nothing else", () => {
    expect([pgFull, fileFull, { code: 'EDQUOT' }].map(isDiskFull)).toEqual([true, true, true]);
    // 53200 out_of_memory and 53300 too_many_connections are not a full disk; nor is a bare message.
    const others = [{ code: '53200' }, { code: '53300' }, { code: 'EIO' }, new Error('No space left on device'), null];
    expect(others.map(isDiskFull)).toEqual([false, false, false, false, false]);
  });

  test('names which disk', () => {
    expect(diskFullCause(pgFull)).toBe("the database's disk is full (PostgreSQL: 53100 disk_full)");
    expect(diskFullCause(fileFull)).toContain('object store');
  });
});

describe("an import's wait for space", () => {
  test('pauses 0.5 s doubling to 5 s while the wait lasts', async () => {
    const started = Date.now();
    await diskFullWait(pgFull, Date.now(), 0);
    expect(Date.now() - started).toBeGreaterThanOrEqual(450);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  test('past DISK_FULL_WAIT_MS throws the failure with the disk named first, its code kept', async () => {
    const wait = diskFullWait(pgFull, Date.now() - DISK_FULL_WAIT_MS, 7);
    await expect(wait).rejects.toThrow(
      /^the database's disk is full \(PostgreSQL: 53100 disk_full\): could not extend file "base\/16384\/24576"/,
    );
    const e = await wait.catch((err: unknown) => err);
    expect(isDiskFull(e)).toBe(true);
    expect((e as Error).cause).toBe(pgFull);
  });
});
