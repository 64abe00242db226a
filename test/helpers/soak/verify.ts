/**
 * After the faults: the stack must be healthy by itself, every import must equal its twin in a
 * fault-free replay of the same files in the same order into a fresh account (counts, and the
 * imported contacts' checksum), and every client contact must be as its last write left it.
 */
import type { Sql } from '../../../src/db';
import { soakAccount, type SoakAccount } from './accounts';
import { IMPORT_DOMAIN } from './files';
import type { Recorder } from './http';
import { runOneImport, type ImportOptions, type ImportRun } from './imports';
import { read, type Client } from './traffic';

export const COUNTS = [
  'status',
  'rowCount',
  'addedCount',
  'updatedCount',
  'skippedCount',
  'malformedCount',
  'duplicateInFileCount',
] as const;

/** /readyz 200 within `ms`. */
export async function healthy(base: string, ms = 60_000): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const ok = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(5_000) }).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) return true;
    await Bun.sleep(250);
  }
  return false;
}

/** The imported contacts of an account (the client's own excluded), as one checksum. */
export async function importedChecksum(sql: Sql, accountId: string): Promise<string> {
  const [row] = await sql<{ count: number; checksum: string }[]>`
    select count(*)::int as count,
           coalesce(md5(string_agg(email || '|' || attributes::text || '|' || brand_ids::text || '|' || enabled::text,
                                   E'\n' order by email_md5)), '') as checksum
    from contacts
    where account_id = ${accountId}::uuid and lower(email) like ${`%@${IMPORT_DOMAIN}`}`;
  return `${row!.count} contacts, ${row!.checksum}`;
}

export interface ImportCheck {
  replays: ImportRun[];
  /** One line per import whose counts differ from its twin's, or that did not end `success`. */
  differences: string[];
  /** One line per account: its imports' counts summed, and its imported contacts, against the replay's. */
  summaries: string[];
}

const sum = (runs: ImportRun[]) =>
  COUNTS.slice(1)
    .map((k) => `${k.replace('Count', '')} ${runs.reduce((n, r) => n + (Number(r.final[k]) || 0), 0)}`)
    .join(', ');

/** Replays each account's files in order into a fresh account, all accounts at once. */
export async function replayImports(
  sql: Sql,
  rec: Recorder,
  base: string,
  accounts: SoakAccount[],
  runs: ImportRun[],
  opts: ImportOptions,
): Promise<ImportCheck> {
  const replays: ImportRun[] = [];
  const differences: string[] = [];
  const summaries: string[] = [];
  await Promise.all(
    accounts.map(async (acct) => {
      const twin = await soakAccount(sql, acct.index, `soak replay ${acct.index}`);
      const mine = runs.filter((r) => r.account === acct.index).sort((a, b) => a.file - b.file);
      for (const run of mine) {
        const again = await runOneImport(rec, base, twin, run, opts);
        replays.push(again);
        const diff = COUNTS.filter((k) => run.final[k] !== again.final[k]);
        const label = `account ${acct.index} file ${run.file} (import ${run.id})`;
        if (run.final.status !== 'success')
          differences.push(`${label} ended ${run.final.status}: ${run.final.failureReason ?? ''}`);
        else if (diff.length)
          differences.push(
            `${label}: ${diff.map((k) => `${k} ${run.final[k]} vs ${again.final[k]} fault-free`).join(', ')}`,
          );
      }
      const [got, want] = [await importedChecksum(sql, acct.id), await importedChecksum(sql, twin.id)];
      if (got !== want) differences.push(`account ${acct.index}: imported contacts ${got}; fault-free: ${want}`);
      const twins = replays.filter((r) => r.account === acct.index);
      summaries.push(
        `account ${acct.index}: ${mine.length} imports (${sum(mine)}), ${got}; ` +
          `replay: ${twins.length} imports (${sum(twins)}), ${want}`,
      );
    }),
  );
  summaries.sort();
  return { replays, differences, summaries };
}

/**
 * Reads every client contact (those never written too) and checks it against what its writes
 * allow; returns how many writes had no clear answer (5xx or none), each settled by a later answer.
 */
export async function checkClientContacts(rec: Recorder, base: string, c: Client, deadline: number): Promise<number> {
  let ambiguous = 0;
  for (const m of c.contacts) {
    ambiguous += m.uncertainWrites;
    const md5 = new Bun.CryptoHasher('md5').update(m.email).digest('hex');
    let done = false;
    while (!done && Date.now() < deadline) {
      const a = await rec.call(c.account.index, 'GET', `${base}/v1/contacts/${md5}`, { key: c.account.key });
      done = read(c, m, a, 'after the soak');
      if (!done) await Bun.sleep(500);
    }
    if (!done)
      c.mismatches.push({
        account: c.account.index,
        email: m.email,
        when: 'never read after the soak',
        got: null,
        expected: m.possible,
      });
  }
  return ambiguous;
}
