/**
 * PostgreSQL's disk filling up, for the soak: each node's `base` (tables, indexes, temp files) on a
 * disk of its own, a sparse ext4 image loop-mounted in its place; "full" is a file fallocate'd
 * over all but a few pages of it, "freed" its removal. Not small-fs.ts's tmpfs and written filler:
 * ten minutes of imports and their replay hold several GiB per node, which a tmpfs would keep in
 * memory (twice: primary and standby) and a written filler would take again; fallocate takes the
 * blocks at once and writes nothing. The WAL stays on the machine's disk, so a write that does not
 * fit is PostgreSQL's 53100 disk_full (never a WAL PANIC) and a checkpoint always fits. Needs root.
 */
import { mkdir, rename, rm, statfs, unlink } from 'node:fs/promises';
import { join } from 'node:path';

/** Room left when "full": a few pages, gone with the next extend. */
const LEFT_WHEN_FULL = 256 * 1024;

async function run(cmd: string[]): Promise<void> {
  const p = Bun.spawn(cmd, { stdout: 'pipe', stderr: 'pipe' });
  const [err, code] = await Promise.all([new Response(p.stderr).text(), p.exited]);
  if (code !== 0) throw new Error(`${cmd.join(' ')} failed (exit ${code}): ${err}`);
}

export interface BaseDisk {
  dir: string;
  /** Takes all but a few pages; resolves with the bytes PostgreSQL had in use. */
  fill(): Promise<number>;
  /** The space back. Safe to call twice. */
  free(): Promise<void>;
  /** At the end, with the server stopped. */
  unmount(): Promise<void>;
}

/**
 * Moves `<nodeDir>/base` (the server stopped) onto a new ext4 of `bytes` in a sparse image beside
 * the node's directory (pg_rewind and pg_basebackup copy what is inside it).
 */
export async function baseOnOwnDisk(nodeDir: string, bytes: number): Promise<BaseDisk> {
  if (process.getuid?.() !== 0) throw new Error('baseOnOwnDisk mounts a filesystem, which needs root');
  const dir = join(nodeDir, 'base');
  const image = `${nodeDir}-base.img`;
  const old = `${dir}.before-own-disk`;
  await run(['truncate', '-s', String(bytes), image]);
  await run(['mkfs.ext4', '-q', '-m', '0', image]);
  await rename(dir, old);
  await mkdir(dir);
  await run(['mount', '-o', 'loop', image, dir]);
  // Root's lost+found: pg_rewind (as postgres) could not read it and would fail every rebuild.
  await rm(join(dir, 'lost+found'), { recursive: true, force: true });
  await run(['cp', '-a', `${old}/.`, dir]);
  await run(['chown', 'postgres:postgres', dir]);
  await run(['chmod', '700', dir]);
  await rm(old, { recursive: true, force: true });
  const filler = join(dir, '.soak-disk-full');
  return {
    dir,
    async fill() {
      const s = await statfs(dir);
      const used = (s.blocks - s.bfree) * s.bsize;
      await run(['fallocate', '-l', String(Math.max(4096, s.bavail * s.bsize - LEFT_WHEN_FULL)), filler]);
      return used;
    },
    free: () => unlink(filler).catch(() => {}),
    async unmount() {
      await run(['umount', dir]).catch(() => run(['umount', '-l', dir]).catch(() => {}));
      await rm(image, { force: true });
    },
  };
}
