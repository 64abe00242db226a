/**
 * The import files, made again from (seed, account, number) whenever needed, so the fault-free
 * replay gets byte-for-byte the files the soak imported without keeping them in memory. File k of
 * an account holds addresses k·rows/2 … k·rows/2 + rows − 1: half of them were in file k − 1. A
 * third of the rows carry the same values in every file (an overwrite that changes nothing), the
 * rest new ones; a few rows are malformed, a few repeat an earlier address (some in other case).
 */
import { rngFor } from './prng';

/** The imported contacts' domain: the client's own contacts never use it. */
export const IMPORT_DOMAIN = 'imp.example';
export const IMPORT_COLUMNS = ['Email', 'n', 'name'];

export function importFile(seed: number, account: number, k: number, rows: number): string {
  const rng = rngFor(seed, `file-${account}-${k}`);
  const base = (k * rows) / 2;
  const lines = [IMPORT_COLUMNS.join(',')];
  const email = (j: number, upper: boolean) =>
    upper ? `U${j}@${IMPORT_DOMAIN.toUpperCase()}` : `u${j}@${IMPORT_DOMAIN}`;
  for (let i = 0; i < rows; i++) {
    const j = base + i;
    const n = j % 3 === 0 ? j : j * 10 + k;
    lines.push(`${email(j, rng.next() < 0.003)},${n},name-${j}`);
    const roll = rng.next();
    if (roll < 0.002)
      lines.push(`bad-${k}-${i}.${IMPORT_DOMAIN},1,x`); // no @
    else if (roll < 0.004) lines.push(`u${j}@${IMPORT_DOMAIN},not-a-number,x`);
    else if (roll < 0.007 && i > 0) {
      // A repeat of an earlier row of this file: the later one is the one imported.
      const r = j - rng.int(1, Math.min(i, 50));
      lines.push(`${email(r, rng.next() < 0.5)},${r * 7 + k},again-${r}`);
    }
  }
  return `${lines.join('\n')}\n`;
}
