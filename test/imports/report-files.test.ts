// Temporary rejected-rows report files (worker/import/report.ts) of a worker killed mid-merge are
// removed when a worker starts; those of live processes stay.
import { expect, test } from 'bun:test';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { removeStaleReportFiles } from '../../worker/import/report';

test('files of exited processes are removed; this process, live ones and other files stay', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'report-files-'));
  try {
    const exited = Bun.spawn(['true']);
    await exited.exited;
    const live = Bun.spawn(['sleep', '30']);
    const id = crypto.randomUUID();
    const names = {
      dead: `rejected-rows-${id}-${exited.pid}-1.csv`,
      mine: `rejected-rows-${id}-${process.pid}-2.csv`,
      live: `rejected-rows-${id}-${live.pid}-3.csv`,
      other: `rejected-rows-notes-${exited.pid}.txt`,
    };
    for (const n of Object.values(names)) await writeFile(join(dir, n), 'row,reason\n');
    expect(await removeStaleReportFiles(dir)).toEqual([names.dead]);
    expect((await readdir(dir)).sort()).toEqual([names.live, names.mine, names.other].sort());
    live.kill();
    await live.exited;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
