/**
 * Why a row of an import's file did not become a contact that was added or updated: the reason
 * codes of the rejected-rows report (GET /v1/contact-imports/{id}/rejected-rows), an extension
 * beyond the contract. Each code belongs to exactly one of the import's counters, so the report's
 * lines per counter add up to malformedCount, duplicateInFileCount and skippedCount.
 *
 * The codes are stable: clients match on them. The wording of a detail may change.
 */

export type Counter = 'malformed' | 'duplicateInFile' | 'skipped';

interface ReasonInfo {
  counter: Counter;
  /** what the reason means, for the API reference */
  means: string;
}

export const REASONS = {
  // Malformed: the read phase refuses the row (worker/import/cells.ts, worker/import/read.ts).
  wrong_field_count: { counter: 'malformed', means: 'the row has more or fewer fields than the header' },
  bad_quote: { counter: 'malformed', means: 'a quoted field is not closed, or text follows its closing quote' },
  missing_email: { counter: 'malformed', means: 'the Email cell is empty' },
  invalid_email: { counter: 'malformed', means: 'the Email cell is not a valid email address' },
  value_too_long: { counter: 'malformed', means: 'a value (or a list entry) is over 255 characters' },
  wrong_type: { counter: 'malformed', means: "a value is not of its column's type (number, boolean, email)" },
  unknown_brand: { counter: 'malformed', means: 'the Brand cell names no live brand of the account' },
  nul_character: { counter: 'malformed', means: 'a cell contains a NUL character' },
  // Duplicate: a later row of the file has the same email address (the last one is imported).
  duplicate_in_file: { counter: 'duplicateInFile', means: 'a later row has the same email; `detail` names it' },
  // Skipped: the merge left the contact as it was (sql/merge/merge-batch.sql).
  seed_address: { counter: 'skipped', means: 'the email is a seed address of the account' },
  disabled_contact: { counter: 'skipped', means: 'the contact is disabled and restoreDisabled was false' },
  existing_contact: { counter: 'skipped', means: 'the contact exists and the strategy is skip' },
  unchanged: { counter: 'skipped', means: 'the row would change nothing (strategy keep or overwrite)' },
} as const satisfies Record<string, ReasonInfo>;

export type Reason = keyof typeof REASONS;

/**
 * Reasons recorded before the merge (malformed rows by the read, duplicate rows by the dedupe); a
 * read that starts over clears exactly these.
 */
export const READ_REASONS = (Object.keys(REASONS) as Reason[]).filter((r) => REASONS[r].counter !== 'skipped');

/** The report's first four columns; the row's own cells follow, as the file had them. */
export const REPORT_COLUMNS = ['row', 'reason', 'column', 'detail'] as const;

/** What one rejected row's detail says. `column` is its name, `info` the reason's number (see below). */
export function rejectionDetail(
  reason: Reason,
  column: { name: string; type: string } | undefined,
  info: number | null,
  header: number,
): string {
  const col = column?.name ?? '';
  switch (reason) {
    case 'wrong_field_count':
      return `The row has ${info} field${info === 1 ? '' : 's'}; the header has ${header}.`;
    case 'bad_quote':
      return 'A quoted field is not closed, or other text follows its closing quote.';
    case 'missing_email':
      return 'The Email cell is empty.';
    case 'invalid_email':
      return 'The Email cell is not a valid email address.';
    case 'value_too_long':
      return column?.type === 'array' || column?.type === 'brand'
        ? `An entry of the ${col} list is longer than 255 characters.`
        : `The ${col} value is longer than 255 characters.`;
    case 'wrong_type':
      return `The ${col} value is not ${TYPE_WORDS[column?.type ?? ''] ?? `of type ${column?.type}`}.`;
    case 'unknown_brand':
      return 'The Brand cell names a brand (by name or id) that this account does not have.';
    case 'nul_character':
      return `The ${col} value contains a NUL character.`;
    case 'duplicate_in_file':
      return `Row ${info} has the same email address and was imported instead (the last row of an email wins).`;
    case 'seed_address':
      return 'The email address is a seed address of this account; seeds are never imported.';
    case 'disabled_contact':
      return 'The contact is disabled and the import does not restore disabled contacts.';
    case 'existing_contact':
      return 'The contact exists and the import skips existing contacts (strategy skip).';
    case 'unchanged':
      return 'The row would change nothing on the existing contact.';
  }
}

const TYPE_WORDS: Record<string, string> = {
  number: 'a number',
  boolean: 'a boolean (true, false, yes, no, 1 or 0)',
  email: 'a valid email address',
};

/** One field of the report, quoted when it must be (RFC 4180). */
export function csvField(s: string): string {
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}
