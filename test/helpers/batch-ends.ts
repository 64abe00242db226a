/**
 * The checkpoints a merge of `rows` deduplicated rows moves through with batches of `batch` rows:
 * every batch but the last is exactly `batch` rows of the import's order (the spec's batches),
 * whatever the merge table's parts (worker/import/staging.ts).
 */
export function mergeBatchEnds(rows: number, batch: number): number[] {
  const ends: number[] = [];
  for (let done = 0; done < rows;) ends.push((done = Math.min(done + batch, rows)));
  return ends;
}
