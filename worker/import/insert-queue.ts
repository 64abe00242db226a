import type { Sql } from '../../src/db';

/**
 * Statements run one after another in the background on the pool, while the read phase goes on
 * (its own connection carries the COPY). The first failure is kept: `check` throws it, and
 * `close` waits for the last statement and throws it too.
 */
export class InsertQueue {
  private chain: Promise<void> = Promise.resolve();
  private failure: unknown;

  constructor(private readonly sql: Sql) {}

  push(statement: string, params: unknown[]): void {
    this.check();
    this.chain = this.chain.then(() =>
      this.sql.unsafe(statement, params as never[], { prepare: false }).then(
        () => {},
        (e: unknown) => {
          this.failure ??= e;
        },
      ),
    );
  }

  check(): void {
    if (this.failure !== undefined) throw this.failure;
  }

  async close(): Promise<void> {
    await this.chain;
    this.check();
  }
}
