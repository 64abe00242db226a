import { join } from 'node:path';

const ROOT = join(import.meta.dir, '../..');

/** What one run of the admin CLI gave: its stdout, stderr and exit code. */
export interface AdminRun {
  out: string;
  err: string;
  code: number;
}

/**
 * The admin CLI as an operator runs it: `bun src/cli/admin.ts <args>` in a subprocess against
 * `databaseUrl`, with the test's environment plus `env`.
 */
export async function runAdmin(
  databaseUrl: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<AdminRun> {
  const proc = Bun.spawn([join(ROOT, 'node_modules/.bin/bun'), 'src/cli/admin.ts', ...args], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: databaseUrl, ADMIN_DEBUG: '', ...env },
    stdout: 'pipe',
    stderr: 'pipe',
  });
  const [out, err, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  return { out, err, code };
}
