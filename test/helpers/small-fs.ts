/**
 * A disk that fills up, for the disk-full fault tests and the chaos soak: a directory moved onto a
 * tmpfs of a fixed size (so filling it fills nothing else of the machine), and a filler file that
 * leaves N bytes free on whatever filesystem holds a directory, removed again to free the space.
 *
 * Mounting needs root (CI runs as root, like the dev machine); filling works on any filesystem.
 *
 * @example
 * // PostgreSQL stopped: its data directory onto a 512 MiB disk of its own, then started again.
 * const disk = await moveOntoSmallFs(pgDir, 512 * 1024 ** 2);
 * const filled = await fillDisk(pgDir, 0); // PostgreSQL's next extend fails with 53100 disk_full
 * await filled.free(); // the space is back
 * await disk.unmount(); // at the end, with PostgreSQL stopped
 */
import { randomBytes } from 'node:crypto';
import { mkdir, open, rename, rm, stat, statfs } from 'node:fs/promises';
import { join } from 'node:path';

export interface SmallFs {
  dir: string;
  /** Unmounts the tmpfs (lazily, if a process still holds a file on it); its content is gone. */
  unmount(): Promise<void>;
}

export interface Filled {
  /** The filler file. */
  path: string;
  /** Bytes it took. */
  bytes: number;
  /** Removes the filler: the space is free again. Safe to call twice. */
  free(): Promise<void>;
}

async function run(cmd: string[]): Promise<void> {
  const p = Bun.spawn(cmd, { stdout: 'pipe', stderr: 'pipe' });
  const [err, code] = await Promise.all([new Response(p.stderr).text(), p.exited]);
  if (code !== 0) throw new Error(`${cmd.join(' ')} failed (exit ${code}): ${err}`);
}

/** Bytes an unprivileged writer (PostgreSQL, the API) can still write on the filesystem holding `dir`. */
export async function freeBytes(dir: string): Promise<number> {
  const s = await statfs(dir);
  return s.bavail * s.bsize;
}

/**
 * Moves `dir`'s content onto a new tmpfs of `bytes` mounted at the same path, with the same owner and
 * mode, so whatever uses `dir` (a stopped PostgreSQL's data directory, an object store's directory)
 * finds it where it was. Nothing may have files open under `dir` while it moves.
 */
export async function moveOntoSmallFs(dir: string, bytes: number): Promise<SmallFs> {
  if (process.getuid?.() !== 0) throw new Error('moveOntoSmallFs mounts a tmpfs, which needs root');
  await mkdir(dir, { recursive: true });
  const { uid, gid, mode } = await stat(dir);
  const old = `${dir}.before-small-fs`;
  await rename(dir, old);
  await mkdir(dir);
  const options = `size=${bytes},mode=${(mode & 0o7777).toString(8)},uid=${uid},gid=${gid}`;
  await run(['mount', '-t', 'tmpfs', '-o', options, 'small-fs', dir]);
  // cp -a keeps owners and modes (PostgreSQL refuses a data directory it does not own, or one others can read).
  await run(['cp', '-a', `${old}/.`, dir]);
  await rm(old, { recursive: true, force: true });
  return {
    dir,
    async unmount() {
      await run(['umount', '-l', dir]).catch(() => {});
    },
  };
}

/**
 * Fills the filesystem holding `dir` until `leaveBytes` remain free (0: full), with one preallocated
 * file in `dir`. A write that needs more than what is left fails with ENOSPC (PostgreSQL: 53100
 * disk_full, or a PANIC when it is the WAL that cannot grow).
 */
export async function fillDisk(dir: string, leaveBytes = 0): Promise<Filled> {
  const path = join(dir, `.disk-full-${randomBytes(4).toString('hex')}`);
  const fh = await open(path, 'wx', 0o600);
  let bytes = 0;
  try {
    const target = Math.max(0, (await freeBytes(dir)) - leaveBytes);
    const chunk = Buffer.alloc(1024 * 1024);
    // Written, not fallocate'd: every filesystem counts written blocks the same way.
    while (bytes < target) {
      const n = Math.min(chunk.length, target - bytes);
      try {
        bytes += (await fh.write(chunk, 0, n)).bytesWritten;
      } catch (e) {
        // Someone else wrote meanwhile: the disk is as full as it gets.
        if ((e as NodeJS.ErrnoException).code === 'ENOSPC') break;
        throw e;
      }
    }
  } finally {
    await fh.close();
  }
  return { path, bytes, free: () => rm(path, { force: true }) };
}
