import { stagingTables } from '../../worker/import/staging';

/**
 * The checkpoints a merge of these (distinct) addresses moves through with batches of `batch`
 * rows: the merge table comes in parts by email_md5 range (worker/import/staging.ts), a part's
 * last batch ending at the part's end, so batch ends are not simply multiples of the batch size.
 */
export function mergeBatchEnds(emails: readonly string[], batch: number): number[] {
  const md5s = emails.map((e) => uuidOf(Bun.MD5.hash(e.toLowerCase(), 'hex') as string));
  const ends: number[] = [];
  let offset = 0;
  // Same-format lowercase uuids compare as text exactly as PostgreSQL compares them as uuids.
  for (const part of stagingTables(crypto.randomUUID()).parts) {
    const n = md5s.filter((m) => (part.from === null || m >= part.from) && (part.to === null || m < part.to)).length;
    for (let done = 0; done < n; ) ends.push(offset + (done = Math.min(done + batch, n)));
    offset += n;
  }
  return ends;
}

function uuidOf(hex: string): string {
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
