import { heapSize } from 'bun:jsc';

/**
 * How often the guard looks at the heap. `heapSize()` walks JavaScriptCore's heap blocks: about
 * 0.35 ms with the read's 150 MB heap, and read at every parsed chunk it cost 1.1 s per 1M rows of
 * the read's thread (its profile at 5M rows: 4.3 % of the worker). The heap grows 24 MB in about
 * 400,000 rows (seconds), so a look every 100 ms sees each step of growth in time.
 */
const LOOK_EVERY_MS = 100;

/**
 * A full garbage collection whenever the JS heap has grown by `growth` bytes since the last one.
 *
 * For the read phase with the repeats filter on (repeats.ts). JavaScriptCore counts the filter's bit
 * array (up to 32 MB) as live heap and scales its next full collection with it; the strings the
 * read leaves behind (cells, lines, md5s that outlived an eden collection) then pile up in the old
 * generation far beyond that. Measured (bench/steps/import-memory.ts, 5M rows, a 32 MB filter): the heap
 * grew to 163 MB before a full collection and the worker peaked at 358-377 MB, against 170-180 MB
 * with the report off; collected at every 24 MB of growth, 225 MB (1M rows: 175 MB). A full
 * collection costs ~40 ms here (the filter holds no pointers to mark), about one per 400,000 rows.
 */
export class HeapGuard {
  private base = heapSize();
  private lookAt = performance.now() + LOOK_EVERY_MS;

  constructor(private readonly growth: number) {}

  /** Call between chunks of work: cheap (a clock read) unless a look at the heap is due. */
  check(): void {
    const now = performance.now();
    if (now < this.lookAt) return;
    this.lookAt = now + LOOK_EVERY_MS;
    if (heapSize() - this.base < this.growth) return;
    Bun.gc(true);
    this.base = heapSize();
  }
}
