import { heapSize } from 'bun:jsc';

/**
 * A full garbage collection whenever the JS heap has grown by `growth` bytes since the last one.
 *
 * For the read phase with the repeats filter on (repeats.ts). JavaScriptCore counts the filter's bit
 * array (up to 32 MB) as live heap and scales its next full collection with it; the strings the
 * read leaves behind (cells, lines, md5s that outlived an eden collection) then pile up in the old
 * generation far beyond that. Measured (bench/import-memory.ts, 5M rows, a 32 MB filter): the heap
 * grew to 163 MB before a full collection and the worker peaked at 358-377 MB, against 170-180 MB
 * with the report off; collected at every 24 MB of growth, 225 MB (1M rows: 175 MB). A full
 * collection costs ~40 ms here (the filter holds no pointers to mark), about one per 400,000 rows.
 */
export class HeapGuard {
  private base = heapSize();

  constructor(private readonly growth: number) {}

  /** Call between chunks of work: cheap (reads a counter) unless a collection is due. */
  check(): void {
    if (heapSize() - this.base < this.growth) return;
    Bun.gc(true);
    this.base = heapSize();
  }
}
