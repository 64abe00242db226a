import type { Pipeline } from '../state';

/**
 * Keeps each plan table (merge-batch.sql) a few batches big: on a Citus cluster, the only place the
 * batches keep their plan in a table (one PostgreSQL's batch is one statement). A batch inserts its rows' plan and
 * deletes it again before it commits; nothing else frees those pages, since PostgreSQL inserts
 * only into pages the free-space map names and only VACUUM fills that map, and autovacuum comes by
 * once a minute at best. Left alone, a plan table grew to the size of its whole part of the merge
 * table (import B of 1M rows: 274 MB beside the part's 240 MB, so ~7 GB beside each 6 GB part of
 * 25M rows), every page written to disk once it left shared buffers and crowding the contacts the
 * merge reads out of the page cache. Vacuumed: 162-175 MB at 1M; at 25M 1.3 and 1.9 GB at their
 * peaks (rows stay while any transaction older than them runs, such as an ANALYZE of the contacts).
 *
 * So each committed batch asks for a VACUUM of the plan tables it wrote: one at a time, on a
 * connection of its own (VACUUM cannot run inside a transaction), beside the next batches. A batch's
 * rows become removable once no transaction still running began before it committed: the batch in
 * flight beside it usually did, so a plan table holds ~3 batches of pages, reused from then on.
 * `truncate false`: giving the empty tail back to the OS would take a lock that waits for the
 * batch in flight, and the pages are wanted again by the next batch anyway.
 *
 * A VACUUM that fails (a connection cut, the server restarting) costs only the space it would have
 * freed: it is logged, and the merge goes on; the batches' own errors are what stop an import.
 */
export class PlanVacuum {
  private readonly pending = new Set<string>();
  /** Whether drain() runs; set and cleared synchronously, so no ask lands between its end and a new start. */
  private draining = false;
  private running: Promise<void> = Promise.resolve();

  constructor(private readonly p: Pick<Pipeline, 'sql' | 'log'>) {}

  /** Vacuums `tables` after what is running now (a table already waiting is vacuumed once). */
  after(tables: Iterable<string>): void {
    for (const table of tables) this.pending.add(table);
    if (this.draining || this.pending.size === 0) return;
    this.draining = true;
    this.running = this.drain();
  }

  /** Resolves once no VACUUM is running or waiting (it never rejects). */
  async settled(): Promise<void> {
    while (this.draining) await this.running;
  }

  private async drain(): Promise<void> {
    try {
      for (let table = this.next(); table !== undefined; table = this.next()) {
        try {
          await this.p.sql.unsafe(`vacuum (truncate false) ${table}`);
        } catch (e) {
          this.p.log('import plan vacuum failed', { table, error: (e as Error).message });
        }
      }
    } finally {
      this.draining = false;
    }
  }

  private next(): string | undefined {
    const [table] = this.pending;
    if (table !== undefined) this.pending.delete(table);
    return table;
  }
}
