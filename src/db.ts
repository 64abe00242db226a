import postgres from 'postgres';

export type Sql = postgres.Sql<{}>;
export type Tx = postgres.TransactionSql<{}>;

/**
 * The one postgres.js instance of a process. bigint columns (counters) come back as JS numbers:
 * every counter here stays far below 2^53. `debug` sees every statement sent (tests count round trips).
 */
export function connect(url: string, max = 10, debug?: (connection: number, query: string) => void): Sql {
  return postgres(url, {
    max,
    ...(debug && { debug }),
    idle_timeout: 30,
    connect_timeout: 10,
    onnotice: () => {},
    types: {
      bigint: { to: 20, from: [20], serialize: (x: number) => String(x), parse: (x: string) => Number(x) },
    },
    connection: { application_name: process.env.APP_NAME ?? 'contact-service' },
  }) as unknown as Sql;
}
