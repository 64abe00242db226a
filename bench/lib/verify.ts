/**
 * Checks after every timed import: the counters against what the generator knows, the contacts
 * table against the counters, and a sample of contacts read back through GET /v1/contacts/{md5}
 * against the row model of the file's shape (last row per email wins; B changes every value;
 * brands accumulate).
 */
import { deepStrictEqual } from 'node:assert';
import type { Sql } from '../../src/db';
import type { BenchAccount } from './account';
import { md5Hex, type Value } from './dataset';
import type { FileMeta } from './generate';
import type { ImportView } from './import-flow';
import { shapeOf, type Shape } from './shapes';

export class VerificationError extends Error {}

function expect(ok: boolean, what: string): void {
  if (!ok) throw new VerificationError(what);
}

/** Import A on a fresh account adds every distinct good row; B (overwrite, every value changed) updates every one. */
export function checkCounts(view: ImportView, file: FileMeta, label: string, mode: 'added' | 'updated'): void {
  const v = view;
  const added = mode === 'added' ? file.normal : 0;
  const updated = mode === 'updated' ? file.normal : 0;
  const got = {
    rowCount: v.rowCount,
    addedCount: v.addedCount,
    updatedCount: v.updatedCount,
    skippedCount: v.skippedCount,
    malformedCount: v.malformedCount,
    duplicateInFileCount: v.duplicateInFileCount,
  };
  const want = {
    rowCount: file.normal,
    addedCount: added,
    updatedCount: updated,
    skippedCount: 0,
    malformedCount: file.malformed,
    duplicateInFileCount: file.duplicates,
  };
  expect(
    JSON.stringify(got) === JSON.stringify(want),
    `${label} counts ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`,
  );
  expect(
    v.rowCount === v.addedCount + (v.updatedCount ?? 0) + (v.skippedCount ?? 0),
    `${label}: rowCount != added + updated + skipped`,
  );
  expect(
    typeof v.completedAt === 'string' && v.percentComplete === undefined,
    `${label}: success without completedAt, or with percentComplete`,
  );
}

export async function checkContactCount(sql: Sql, accountId: string, expected: number, label: string): Promise<void> {
  const [{ n } = { n: -1 }] = await sql<
    { n: number }[]
  >`select count(*)::int as n from contacts where account_id = ${accountId}`;
  expect(n === expected, `${label}: the account holds ${n} contacts, expected ${expected}`);
}

interface ContactBody {
  email: string;
  emailMd5: string;
  attributes: Record<string, Value>;
  brandIds: string[];
  enabled: boolean;
}

/** Attributes the row model says the contact holds after the given variants were imported in order. */
function expectedContact(shape: Shape, j: number, rows: number, variants: number[], account: BenchAccount) {
  const last = shape.lastRowFor(j, rows);
  const brands = new Set<string>();
  let attributes: Record<string, Value> = {};
  for (const v of variants) {
    const row = shape.rowAt(last, v);
    attributes = { ...attributes, ...row.attributes }; // overwrite: every sent value replaces, unsent ones stay
    for (const b of row.brands) brands.add(account.brandIds[b]!);
  }
  // The identity once lowercased: the contact keeps the last row's spelling (the narrow shape's
  // capitals, its upper-case repeats).
  return { email: shape.rowAt(j, 0).email.toLowerCase(), attributes, brandIds: [...brands].sort() };
}

/**
 * Reads `count` sampled contacts through the API and compares them with the model. With `changedFrom`,
 * every attribute must also differ from what that earlier variant stored.
 */
export async function checkSample(
  ctx: { baseUrl: string },
  account: BenchAccount,
  file: FileMeta,
  variants: number[],
  count: number,
  label: string,
): Promise<number> {
  const shape = shapeOf(file);
  const names = new Set<string>(shape.attributes.map((a) => a.name));
  const samples = shape.sampleNormalRows(file.rows, count);
  for (const j of samples) {
    const want = expectedContact(shape, j, file.rows, variants, account);
    const md5 = md5Hex(want.email);
    const res = await fetch(`${ctx.baseUrl}/v1/contacts/${md5}`, {
      headers: { authorization: `Bearer ${account.key}` },
    });
    expect(res.status === 200, `${label}: GET contact of row ${j} answered ${res.status}`);
    const got = (await res.json()) as ContactBody;
    const stored = Object.fromEntries(Object.entries(got.attributes).filter(([k]) => names.has(k)));
    try {
      deepStrictEqual(
        {
          email: got.email.trim().toLowerCase(),
          emailMd5: got.emailMd5,
          enabled: got.enabled,
          attributes: stored,
          brandIds: [...got.brandIds].sort(),
        },
        { email: want.email, emailMd5: md5, enabled: true, attributes: want.attributes, brandIds: want.brandIds },
      );
    } catch (e) {
      throw new VerificationError(
        `${label}: contact of row ${j} (last row ${shape.lastRowFor(j, file.rows)}) differs from the model: ` +
          (e as Error).message,
      );
    }
    if (variants.length > 1) {
      const before = expectedContact(shape, j, file.rows, variants.slice(0, -1), account).attributes;
      for (const [k, v] of Object.entries(before))
        expect(JSON.stringify(stored[k]) !== JSON.stringify(v), `${label}: row ${j} attribute ${k} did not change`);
    }
  }
  return samples.length;
}

/**
 * An import of `file` into `account`, checked after its timing: its counts, the account's contact
 * total, and `samples` contacts read back through the API (none when 0). `variants` are the files
 * imported into the account so far, oldest first ([0] for file A alone, [0, 1] after B).
 */
export async function checkImport(
  ctx: { baseUrl: string; sql: Sql },
  account: BenchAccount,
  file: FileMeta,
  view: ImportView,
  check: { label: string; mode: 'added' | 'updated'; variants: number[]; samples: number },
): Promise<void> {
  checkCounts(view, file, check.label, check.mode);
  await checkContactCount(ctx.sql, account.id, file.normal, check.label);
  if (check.samples) await checkSample(ctx, account, file, check.variants, check.samples, check.label);
}
