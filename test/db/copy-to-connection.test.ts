/**
 * A connection stays usable after a COPY … TO STDOUT whose stream was read slowly (postgres.js,
 * patches/postgres+3.4.9.patch; porsager/postgres#499). postgres.js pauses the socket when a row
 * pushed into the COPY's stream meets its high-water mark, and only the stream's next read resumes
 * it. When the COPY's last rows and its end came in one chunk the stream ended paused, nothing read
 * again, and the connection's next query waited for ever: a paced gzip export (worker/exports)
 * finished its file and then hung on the statement that records its success.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test';
import type { Readable } from 'node:stream';
import { connect, type Sql } from '../../src/db';
import { createTestDatabase, type TestDatabase } from '../helpers/db';

let db: TestDatabase;
let one: Sql;

beforeAll(async () => {
  db = await createTestDatabase();
  // One connection: the query after the COPY must run on the COPY's own connection.
  one = connect(db.url, 1);
});
afterAll(async () => {
  await one.end();
  await db.drop();
});

/** Reads the COPY's stream only once its whole answer has reached the client, as a consumer that rests does. */
async function copyReadLate(rows: number, width: number): Promise<number> {
  const stream = (await one
    .unsafe(`copy (select repeat('x', ${width}) from generate_series(1, ${rows})) to stdout`)
    .readable()) as unknown as Readable;
  await Bun.sleep(200);
  let bytes = 0;
  for await (const chunk of stream) bytes += (chunk as Buffer).length;
  return bytes;
}

const answersWithin = (ms: number) =>
  Promise.race([one`select 1 as ok`.then(() => 'answered'), Bun.sleep(ms).then(() => 'hung')]);

test.each([
  [400, 100],
  [2_000, 100],
  [20_000, 100],
])('after a COPY of %i rows of %i bytes read late, the connection answers its next query', async (rows, width) => {
  expect(await copyReadLate(rows, width)).toBe(rows * (width + 1));
  expect(await answersWithin(3_000)).toBe('answered');
});
