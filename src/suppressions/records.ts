import { isValidEmail } from '../contacts/email';
import { invalidRequest, pointer, type FieldError } from '../errors';
import type { ListRow } from './lists';

export type ListFormat = ListRow['format'];

const HEX_LENGTH: Record<ListFormat, number | undefined> = { md5: 32, sha512: 128, 'plain text': undefined };
const HEX = { md5: /^[0-9a-f]{32}$/, sha512: /^[0-9a-f]{128}$/ } as const;

/** What a record of each format must be, for error messages. */
export const FORMAT_RULE: Record<ListFormat, string> = {
  'plain text': 'an email address',
  md5: 'an MD5 hex digest (32 hex digits)',
  sha512: 'a SHA-512 hex digest (128 hex digits)',
};

/**
 * The stored form of a record, as lowercase hex of the bytes kept in suppression_records.value
 * (16 bytes for md5, 64 for sha512, the UTF-8 of the address for plain text), or undefined when
 * the value is not a record of the format. Values are trimmed and lowercased first.
 * @example recordHex('md5', ' 0CC175B9C0F1B6A831C399E269772661 ') // '0cc175b9c0f1b6a831c399e269772661'
 */
export function recordHex(format: ListFormat, raw: string): string | undefined {
  const value = normaliseRecord(format, raw);
  if (value === undefined) return undefined;
  return format === 'plain text' ? Buffer.from(value, 'utf8').toString('hex') : value;
}

/** The trimmed, lowercased record, or undefined when it is not a record of the format. */
export function normaliseRecord(format: ListFormat, raw: string): string | undefined {
  const trimmed = raw.trim();
  if (format === 'plain text') return isValidEmail(trimmed) ? trimmed.toLowerCase() : undefined;
  const lower = trimmed.toLowerCase();
  return lower.length === HEX_LENGTH[format] && HEX[format].test(lower) ? lower : undefined;
}

/** Exact repeats as sent are a 400 pointing at each later occurrence (DESIGN.md: unique as sent). */
export function rejectRepeats(records: readonly string[]): void {
  const firstIndex = new Map<string, number>();
  const errors: FieldError[] = [];
  records.forEach((r, i) => {
    const first = firstIndex.get(r);
    if (first === undefined) firstIndex.set(r, i);
    else
      errors.push({
        detail: `records/${i} repeats records/${first}; records must be unique.`,
        pointer: pointer('records', i),
      });
  });
  if (errors.length === 0) return;
  const at = errors.map((e) => e.pointer!.slice('/records/'.length)).join(', ');
  const what = errors.length === 1 ? `the entry at index ${at} repeats` : `the entries at indexes ${at} repeat`;
  throw invalidRequest(`records must be unique as sent; ${what} an earlier entry.`, errors);
}

/**
 * Stored hex of every record, or a 400 naming every failing zero-based index (all-or-nothing);
 * `errors` has one entry per failing index, the first one first.
 */
export function recordsOrReject(format: ListFormat, records: readonly string[]): string[] {
  const hex: string[] = [];
  const failed: number[] = [];
  records.forEach((r, i) => {
    const h = recordHex(format, r);
    if (h === undefined) failed.push(i);
    else hex.push(h);
  });
  if (failed.length === 0) return hex;
  const rule = FORMAT_RULE[format];
  const what =
    failed.length === 1 ? `The record at index ${failed[0]} does` : `The records at indexes ${failed.join(', ')} do`;
  throw invalidRequest(
    `${what} not match the list's ${format} format (${rule}). Nothing was added.`,
    failed.map((i) => ({ detail: `records/${i} is not ${rule}.`, pointer: pointer('records', i) })),
  );
}
