import type { Sql } from '../../src/db';

/** Statements (of up to 5,000 rows each) allowed to wait behind the running one. */
const MAX_PENDING = 2;

/**
 * Statements run one after another in the background on the pool, while the read phase goes on
 * (its own connection carries the COPY). The first failure is kept: `check` throws it, and
 * `close` waits for the last statement and throws it too. With more than MAX_PENDING statements
 * waiting it is not `ready`: the reader pauses its input until `whenReady()`, so a database slower
 * than the file never leaves a backlog of parameter arrays in memory.
 */
export class InsertQueue {
  private chain: Promise<void> = Promise.resolve();
  private failure: unknown;
  private pending = 0;
  private waiters: (() => void)[] = [];

  constructor(private readonly sql: Sql) {}

  push(statement: string, params: unknown[]): void {
    this.check();
    this.pending++;
    this.chain = this.chain.then(() =>
      this.sql
        .unsafe(statement, params as never[], { prepare: false })
        .then(
          () => {},
          (e: unknown) => {
            this.failure ??= e;
          },
        )
        .finally(() => {
          this.pending--;
          if (this.ready) for (const wake of this.waiters.splice(0)) wake();
        }),
    );
  }

  /** False while more than MAX_PENDING statements wait (or one failed: `whenReady` then says so soon). */
  get ready(): boolean {
    return this.pending <= MAX_PENDING;
  }

  whenReady(): Promise<void> {
    if (this.ready) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  check(): void {
    if (this.failure !== undefined) throw this.failure;
  }

  async close(): Promise<void> {
    await this.chain;
    this.check();
  }
}
