// An error no code caught ends the process with one JSON line saying what it was (src/escaped-errors.ts).
import { describe, expect, test } from 'bun:test';
import { join } from 'node:path';

const MODULE = join(import.meta.dir, '../src/escaped-errors.ts');

async function run(body: string): Promise<{ code: number; stdout: string; lines: Record<string, unknown>[] }> {
  const script = `import { exitOnEscapedErrors } from ${JSON.stringify(MODULE)};
exitOnEscapedErrors('api');
${body}
setTimeout(() => console.log('still serving'), 1_000);`;
  const proc = Bun.spawn([process.execPath, '-e', script], { stdout: 'pipe', stderr: 'pipe' });
  const [code, stdout, stderr] = await Promise.all([
    proc.exited,
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
  ]);
  const lines = stderr
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  return { code, stdout, lines };
}

describe('exitOnEscapedErrors', () => {
  test("an unhandled rejection of a driver's statement: logged with its code and statement, exit 1", async () => {
    // As postgres.js rejects: the statement on the error, not enumerable, out of its message.
    const r = await run(`const message = 'terminating connection due to administrator command';
const e = Object.assign(new Error(message), { code: '57P01' });
Object.defineProperty(e, 'query', { value: '\\n  select b.oid\\n  from pg_catalog.pg_type a\\n', enumerable: false });
void Promise.reject(e);`);
    expect(r.code).toBe(1);
    expect(r.stdout).not.toContain('still serving');
    expect(r.lines).toHaveLength(1);
    expect(r.lines[0]).toMatchObject({
      level: 'error',
      msg: 'api unhandledRejection; exiting',
      error: 'terminating connection due to administrator command',
      code: '57P01',
      query: 'select b.oid from pg_catalog.pg_type a',
    });
  });

  test('an uncaught exception: logged, exit 1; a value that is not an error is logged as text', async () => {
    const thrown = await run(`setTimeout(() => { throw new TypeError('boom'); }, 10);`);
    expect(thrown.code).toBe(1);
    expect(thrown.stdout).not.toContain('still serving');
    expect(thrown.lines).toHaveLength(1);
    expect(thrown.lines[0]).toMatchObject({ msg: 'api uncaughtException; exiting', error: 'boom' });
    expect(String(thrown.lines[0]!.stack)).toContain('TypeError: boom');

    const odd = await run(`void Promise.reject(42);`);
    expect(odd.code).toBe(1);
    expect(odd.lines[0]).toMatchObject({ msg: 'api unhandledRejection; exiting', error: '42' });
    expect(odd.lines[0]).not.toHaveProperty('code');
  });
});
