/**
 * Runs one contact import in its own process, as a worker would, so a test can SIGKILL it at any
 * moment (test/faults/import-crash.test.ts) and a bench can measure its memory (bench/steps/import-memory.ts).
 *
 * usage: bun test/helpers/run-import.ts DATABASE_URL STORE_DIR ACCOUNT_ID IMPORT_ID BATCH_SIZE
 *
 * Transient errors are retried like the queue would (a restarted run can find the killed run's
 * session lock still held for a moment). Prints one JSON line on stdout at the end:
 * `{"ok": boolean, "maxRssKb": number, "vmHwmKb": number, "ms": number}`.
 */
import { randomBytes } from 'node:crypto';
import { connect } from '../../src/db';
import { LocalStore } from '../../src/storage/local';
import { UploadTokens } from '../../src/storage/upload-token';
import { runImport, UnrecoverableImportError } from '../../worker/import/index';
import { testConfig } from './file-store';

const [url, dir, accountId, importId, batch] = process.argv.slice(2);
if (!url || !dir || !accountId || !importId || !batch) {
  console.error('usage: bun test/helpers/run-import.ts DATABASE_URL STORE_DIR ACCOUNT_ID IMPORT_ID BATCH_SIZE');
  process.exit(2);
}

const sql = connect(url, 4);
const storage = new LocalStore(dir, 'http://localhost:0', new UploadTokens(randomBytes(32)));
const config = testConfig(Number(batch));
const started = performance.now();
let ok = false;
for (let attempt = 1; attempt <= 40; attempt++) {
  try {
    await runImport(
      { sql, storage, config, log: (msg, fields) => console.error(msg, JSON.stringify(fields ?? {})) },
      accountId,
      importId,
    );
    ok = true;
    break;
  } catch (e) {
    console.error(`attempt ${attempt}:`, e);
    if (e instanceof UnrecoverableImportError) break;
    await Bun.sleep(250);
  }
}
await sql.end({ timeout: 5 });
// Peak resident set two ways: getrusage, and the kernel's high-water mark for this process.
const vmHwmKb = Number(
  /VmHWM:\s*(\d+)/.exec(
    await Bun.file('/proc/self/status')
      .text()
      .catch(() => ''),
  )?.[1] ?? NaN,
);
console.log(
  JSON.stringify({
    ok,
    maxRssKb: process.resourceUsage().maxRSS,
    vmHwmKb,
    ms: Math.round(performance.now() - started),
  }),
);
process.exit(ok ? 0 : 1);
