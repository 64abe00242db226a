// Manual suppression imports (the admin CLI's `suppression-import`): files, counts, the list hold.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, constants, createWriteStream, openSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AdminError, UsageError } from '../../src/cli/admin/args';
import { suppressionImportCommand, suppressionImportCommands } from '../../src/cli/admin/suppression-import';
import { ApiError } from '../../src/errors';
import { isConnectionGone } from '../../src/db';
import { holdList, transaction, type Conn } from '../../src/suppressions/bulk/list-guard';
import { runManualSuppressionImport } from '../../src/suppressions/bulk/manual-import';
import { BucketSort } from '../../src/suppressions/bulk/bucket-sort';
import { copyInto } from '../../src/suppressions/bulk/copy-in';
import { copyFraming, firstField, recordRows, type LineCounts } from '../../src/suppressions/bulk/record-lines';
import { expectProblem, testApp, type TestApp } from '../helpers/app';
import { createAccount, createSuppressionList } from '../helpers/fixtures';

let t: TestApp;
let dir = '';
beforeAll(async () => {
  t = await testApp();
  dir = await mkdtemp(join(tmpdir(), 'suppression-import-'));
});
afterAll(async () => {
  await t.close();
  await rm(dir, { recursive: true, force: true });
});

const md5 = (s: string) => createHash('md5').update(s).digest('hex');
const sha512 = (s: string) => createHash('sha512').update(s).digest('hex');
const NOBODY = '00000000-0000-4000-8000-000000000000';
let files = 0;

async function fileOf(content: string | Buffer): Promise<string> {
  const path = join(dir, `f${files++}.csv`);
  await writeFile(path, content);
  return path;
}

const newList = (format: 'plain text' | 'md5' | 'sha512') =>
  createSuppressionList(t.db.sql, t.accountId, `list ${crypto.randomUUID()}`, format);
const run = (listId: string, file: string) =>
  runManualSuppressionImport(t.db.sql, { accountId: t.accountId, listId, file });

async function stored(listId: string): Promise<string[]> {
  const rows = await t.db.sql<{ v: string }[]>`
    select encode(value, 'hex') as v from suppression_records
    where account_id = ${t.accountId} and list_id = ${listId} order by value`;
  return rows.map((r) => r.v);
}

describe('runManualSuppressionImport: md5 file', () => {
  test('counts valid, malformed and duplicate lines; skips blank ones; stores the records', async () => {
    const list = await newList('md5');
    const [a, b, c, d, e] = ['a', 'b', 'c', 'd', 'e'].map(md5) as [string, string, string, string, string];
    // One record already on the list, through the API.
    await t.call('POST', `/v1/suppression-lists/${list}/records`, { body: { records: [a] } });
    const file = await fileOf(
      [
        '\ufeffemail_md5,source', // a header that is not a record: malformed
        `${a},old`, // already on the list: duplicate
        `"${b.toUpperCase()}",quoted`,
        `  ${c}  `,
        '',
        '   ',
        `${c.toUpperCase()}`, // repeat in the file after normalisation: duplicate
        'not-a-digest',
        `${d.slice(1)}`, // 31 digits: malformed
        `${d}\r`,
        `${e}`, // last line without a newline
      ].join('\n'),
    );
    const result = await run(list, file);
    expect(result).toEqual({
      id: expect.any(String),
      totalCount: 6,
      addedCount: 4,
      duplicateCount: 2,
      malformedCount: 3,
    });
    expect(await stored(list)).toEqual([a, b, c, d, e].sort());
    const listBody = (await t.call('GET', `/v1/suppression-lists/${list}`)).body;
    expect(listBody.recordCount).toBe(5);
    const imp = (await t.call('GET', `/v1/suppression-lists/${list}/imports/${result.id}`)).body;
    expect(imp).toEqual({
      id: result.id,
      suppressionListId: list,
      status: 'completed',
      method: 'manual',
      totalCount: 6,
      addedCount: 4,
      duplicateCount: 2,
      malformedCount: 3,
      createdAt: expect.any(String),
      completedAt: expect.any(String),
    });
    const hist = (await t.call('GET', `/v1/suppression-lists/${list}/imports`)).body.data;
    expect(hist.map((i: { method: string }) => i.method)).toEqual(['manual', 'api']);
  });

  test('a file of nothing but blank lines completes with zero counts and leaves the list untouched', async () => {
    const list = await newList('md5');
    const before = (await t.call('GET', `/v1/suppression-lists/${list}`)).body;
    const result = await run(list, await fileOf('\n\r\n  \n'));
    expect(result).toMatchObject({ totalCount: 0, addedCount: 0, duplicateCount: 0, malformedCount: 0 });
    expect((await t.call('GET', `/v1/suppression-lists/${list}`)).body).toEqual(before);
  });

  test('an over-long line is one malformed line, the next line still counts', async () => {
    const list = await newList('md5');
    const result = await run(list, await fileOf(`${'f'.repeat(300_000)}\n${md5('next')}\n`));
    expect(result).toMatchObject({ totalCount: 1, addedCount: 1, malformedCount: 1 });
    expect(await stored(list)).toEqual([md5('next')]);
  });
});

describe('runManualSuppressionImport: into an empty list and again', () => {
  test('the same file twice: everything added, then everything a duplicate', async () => {
    const list = await newList('md5');
    const lines = Array.from({ length: 5000 }, (_, i) => md5(String(i % 4000)));
    const file = await fileOf(lines.join('\n'));
    expect(await run(list, file)).toMatchObject({
      totalCount: 5000,
      addedCount: 4000,
      duplicateCount: 1000,
      malformedCount: 0,
    });
    expect(await run(list, file)).toMatchObject({
      totalCount: 5000,
      addedCount: 0,
      duplicateCount: 5000,
      malformedCount: 0,
    });
    const expected = Array.from({ length: 4000 }, (_, i) => md5(String(i))).sort();
    expect(await stored(list)).toEqual(expected);
    expect((await t.call('GET', `/v1/suppression-lists/${list}`)).body.recordCount).toBe(4000);
  });
});

describe('runManualSuppressionImport: other formats', () => {
  test('sha512: 64 raw bytes per record', async () => {
    const list = await newList('sha512');
    const result = await run(list, await fileOf(`${sha512('a').toUpperCase()}\n${md5('a')}\n${sha512('b')},x\n`));
    expect(result).toMatchObject({ totalCount: 2, addedCount: 2, duplicateCount: 0, malformedCount: 1 });
    expect(await stored(list)).toEqual([sha512('a'), sha512('b')].sort());
  });

  test('plain text: addresses trimmed and lowercased, the CSV first column, invalid ones malformed', async () => {
    const list = await newList('plain text');
    const file = await fileOf(
      'email,name\r\n Ann@Example.com ,Ann\r\n"bob@example.org","Bob, Jr"\r\n' +
        'ann@example.COM\r\nnot an address\r\nx@localhost\r\n',
    );
    const result = await run(list, file);
    expect(result).toMatchObject({ totalCount: 3, addedCount: 2, duplicateCount: 1, malformedCount: 3 });
    const values = (await stored(list)).map((h) => Buffer.from(h, 'hex').toString('utf8')).sort();
    expect(values).toEqual(['ann@example.com', 'bob@example.org']);
  });
});

describe('runManualSuppressionImport: one import at a time', () => {
  test('a manual import on a list that is importing is refused with operation_in_progress', async () => {
    const list = await newList('md5');
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    const holder = holdList(
      t.db.sql,
      { accountId: t.accountId, listId: list, method: 'api', estimatedSeconds: 1, describeFailure: () => 'x' },
      async () => {
        started();
        await released;
      },
    );
    await running;
    try {
      const error = await run(list, await fileOf(`${md5('a')}\n`)).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ApiError);
      expect((error as ApiError).code).toBe('operation_in_progress');
      expect((error as ApiError).retryAfter).toBeGreaterThanOrEqual(1);
    } finally {
      release();
      await holder;
    }
    expect(await stored(list)).toEqual([]);
    const hist = (await t.call('GET', `/v1/suppression-lists/${list}/imports`)).body.data;
    expect(hist.map((i: { method: string }) => i.method)).toEqual(['api']);
  });

  test('while a manual import runs, add-records gets a 409 with Retry-After; the import shows importing', async () => {
    const list = await newList('md5');
    // A named pipe: the import reads it, and runs, until the test closes it.
    const fifo = join(dir, `fifo${files++}`);
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    const importing = run(list, fifo);
    const writer = createWriteStream(fifo);
    writer.write(`${md5('first')}\n`);
    let running: { id: string; status: string } | undefined;
    for (let i = 0; i < 200 && !running; i++) {
      running = (await t.call('GET', `/v1/suppression-lists/${list}/imports`)).body.data[0];
      if (!running) await Bun.sleep(10);
    }
    expect(running).toMatchObject({ status: 'importing', method: 'manual' });
    expect(running).not.toHaveProperty('completedAt');
    const res = await t.call('POST', `/v1/suppression-lists/${list}/records`, { body: { records: [md5('api')] } });
    expectProblem(res, 409, 'operation_in_progress');
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    writer.end(`${md5('second')}\n`);
    const result = await importing;
    expect(result).toMatchObject({ id: running!.id, totalCount: 2, addedCount: 2 });
    expect(await stored(list)).toEqual([md5('first'), md5('second')].sort());
    expect(
      (await t.call('POST', `/v1/suppression-lists/${list}/records`, { body: { records: [md5('api')] } })).status,
    ).toBe(200);
  });

  /** Starts an import reading a named pipe; resolves to its outcome. */
  async function importFromPipe(list: string, firstLine: string) {
    const fifo = join(dir, `fifo${files++}`);
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    const outcome = run(list, fifo).catch((e: unknown) => e);
    const writer = createWriteStream(fifo);
    let opened = false;
    writer.on('open', () => (opened = true));
    writer.on('error', () => {}); // EPIPE once the import has stopped reading: expected here
    writer.write(`${firstLine}\n`);
    // An import that ends before it opens the pipe leaves the writer's open blocked for good, and
    // with it one of the runtime's file-system threads: a few of those and every later file
    // operation of this process waits (a CI run lost the rest of this file to 120 s timeouts).
    // Opening the read end lets the writer's open return.
    void outcome.then(() => {
      if (!opened) closeSync(openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK));
    });
    return { outcome, writer };
  }

  // Polls until the backend shows up: returns at once when it does, and gives a slow machine
  // (a loaded CI box, a cold template clone) 30 s before calling it missing.
  async function pidOf(query: string): Promise<number> {
    for (let i = 0; i < 3000; i++) {
      const [row] = await t.db.sql.unsafe<{ pid: number }[]>(query);
      if (row) return row.pid;
      await Bun.sleep(10);
    }
    throw new Error(`no backend for ${query}`);
  }

  async function expectFailedAndFree(list: string, record: string) {
    expect(
      (await t.call('POST', `/v1/suppression-lists/${list}/records`, { body: { records: [record] } })).status,
    ).toBe(200);
    const hist = (await t.call('GET', `/v1/suppression-lists/${list}/imports`)).body.data;
    expect(hist.map((i: { method: string; status: string }) => `${i.method} ${i.status}`)).toEqual([
      'api completed',
      'manual failed',
    ]);
    expect((await t.call('GET', `/v1/suppression-lists/${list}`)).body.recordCount).toBe(1);
  }

  test('a digest import whose connection dies while the file is read applies nothing and fails', async () => {
    const list = await newList('md5');
    const { outcome, writer } = await importFromPipe(list, md5('lost'));
    // The holder's session sits idle in the transaction that holds the list while the file is read
    // and sorted (on Citus its lock is on the node of the account's shards; the session is here).
    // Killed once the import is recorded: between the lock and that row a kill stops an import that
    // never was (a loaded CI run killed it there: nothing to mark failed, and the pipe never opened).
    const pid = await pidOf(`
      select pid from pg_stat_activity
      where datname = current_database() and state = 'idle in transaction' and query ilike '%account_try_xact_lock%'
        and exists (select 1 from suppression_imports i where i.list_id = '${list}' and i.status = 'importing')`).catch(
      (e) => {
        writer.end(); // never leave the import waiting on the pipe for the rest of the file
        throw e;
      },
    );
    await t.db.sql`select pg_terminate_backend(${pid}::int)`;
    writer.end(`${md5('more')}\n`);
    const error = await outcome;
    expect(error).toBeInstanceOf(Error);
    // postgres.js says "Connection terminated…", "write CONNECTION_CLOSED…" or the socket's "read
    // ECONNRESET", by where the kill lands: each is the connection lost, by the one rule that says so.
    expect({ gone: isConnectionGone(error), message: (error as Error).message }).toMatchObject({ gone: true });
    expect(await stored(list)).toEqual([]);
    await expectFailedAndFree(list, md5('after'));
  });

  test('a plain-text import whose connection dies during COPY applies nothing and fails, without hanging', async () => {
    const list = await newList('plain text');
    const { outcome, writer } = await importFromPipe(list, 'lost@example.com');
    const pid = await pidOf(`
      select pid from pg_stat_activity
      where datname = current_database() and query ilike 'copy suppression_import_staging%'`).catch((e) => {
      writer.end(); // never leave the import waiting on the pipe for the rest of the file
      throw e;
    });
    await t.db.sql`select pg_terminate_backend(${pid}::int)`;
    // The pipe's writer goes on and finishes; the import must still fail, not hang.
    writer.end('more@example.com\n');
    expect(await outcome).toBeInstanceOf(Error);
    expect(await stored(list)).toEqual([]);
    await expectFailedAndFree(list, 'after@example.com');
  });
});

describe('runManualSuppressionImport: refusals before anything starts', () => {
  test('an unknown list is not_found, an unreadable file a clear error; no import is recorded', async () => {
    const list = await newList('md5');
    const missing = await runManualSuppressionImport(t.db.sql, {
      accountId: t.accountId,
      listId: NOBODY,
      file: await fileOf('x\n'),
    }).catch((e: unknown) => e);
    expect((missing as ApiError).code).toBe('not_found_error');
    await expect(run(list, join(dir, 'nope.csv'))).rejects.toThrow(/cannot read .*nope\.csv/);
    await expect(run(list, dir)).rejects.toThrow(/directory/);
    expect((await t.call('GET', `/v1/suppression-lists/${list}/imports`)).body.data).toEqual([]);
  });
});

describe('suppressionImportCommand (admin CLI)', () => {
  test('imports and returns the id and counts', async () => {
    const list = await newList('md5');
    const out = await suppressionImportCommand(t.db.sql, {
      account: t.accountId.toUpperCase(),
      list,
      file: await fileOf(`${md5('1')}\n${md5('2')}\nbad\n`),
    });
    expect(out).toEqual({ id: expect.any(String), totalCount: 2, addedCount: 2, duplicateCount: 0, malformedCount: 1 });
  });

  test.each([
    [{ list: NOBODY, file: 'f' }, UsageError, /--account is required/],
    [{ account: NOBODY, file: 'f' }, UsageError, /--list is required/],
    [{ account: NOBODY, list: NOBODY }, UsageError, /--file is required/],
    [{ account: 'acme', list: NOBODY, file: 'f' }, UsageError, /--account must be a uuid/],
    [{ account: NOBODY, list: NOBODY, file: 'f' }, AdminError, /no account/],
  ])('%o is refused', async (flags, kind, message) => {
    const error = await suppressionImportCommand(t.db.sql, flags).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(kind);
    expect((error as Error).message).toMatch(message);
  });

  test('the dispatcher entry checks its flags before touching the database, then imports', async () => {
    const command = suppressionImportCommands['suppression-import']!;
    expect(() => command.prepare(['--account', NOBODY, '--list', NOBODY])).toThrow(UsageError);
    expect(() => command.prepare(['--account', NOBODY, '--list', 'x', '--file', 'f'])).toThrow(/--list must be a uuid/);
    const list = await newList('sha512');
    const work = command.prepare([
      '--account',
      t.accountId,
      '--list',
      list,
      '--file',
      await fileOf(`${sha512('x')}\n`),
    ]);
    expect(await work(t.db.sql)).toMatchObject({ totalCount: 1, addedCount: 1 });
  });

  test('an unknown list, or one of another account, and an unreadable file are AdminErrors', async () => {
    const other = await createAccount(t.db.sql, 'other');
    const theirs = await createSuppressionList(t.db.sql, other, 'theirs', 'md5');
    const file = await fileOf(`${md5('1')}\n`);
    for (const list of [NOBODY, theirs]) {
      const error = await suppressionImportCommand(t.db.sql, { account: t.accountId, list, file }).catch(
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(AdminError);
      expect((error as Error).message).toContain(list);
    }
    const mine = await newList('md5');
    const unreadable = await suppressionImportCommand(t.db.sql, {
      account: t.accountId,
      list: mine,
      file: join(dir, 'missing'),
    }).catch((e: unknown) => e);
    expect(unreadable).toBeInstanceOf(AdminError);
    expect((unreadable as Error).message).toMatch(/cannot read/);
  });
});

describe('copyInto', () => {
  test('a source failing mid-COPY inside a transaction rolls back and leaves the connection usable', async () => {
    const list = await newList('md5');
    const conn = (await t.db.sql.reserve()) as Conn;
    try {
      async function* failing(): AsyncGenerator<Buffer> {
        yield* copyFraming(
          (async function* () {
            const row = Buffer.alloc(6 + 16);
            row.writeInt16BE(1, 0);
            row.writeInt32BE(16, 2);
            yield row;
            throw new Error('source failed');
          })(),
        );
      }
      await conn`create temp table copy_probe (v bytea)`;
      // The transaction holdList opens, which `transaction` applies in and ends.
      await conn`begin`;
      const attempt = transaction(conn, async () => {
        await conn`
          insert into suppression_records (account_id, list_id, value)
          values (${t.accountId}, ${list}, ${Buffer.alloc(16, 1)})`;
        await copyInto(t.db.sql, conn, conn`copy copy_probe (v) from stdin (format binary)`, failing());
      });
      await expect(attempt).rejects.toThrow('source failed');
      const [row] = await conn<{ n: number }[]>`select count(*)::int as n from copy_probe`;
      expect(row!.n).toBe(0);
      expect(await stored(list)).toEqual([]);
    } finally {
      conn.release();
    }
  });
});

describe('copyInto: a COPY the server refuses', () => {
  test('rejects instead of hanging, and the transaction rolls back', async () => {
    const list = await newList('md5');
    const conn = (await t.db.sql.reserve()) as Conn;
    try {
      const value = createHash('md5').update('twice').digest();
      const row = Buffer.concat([
        Buffer.from([0, 3, 0, 0, 0, 16]),
        Buffer.from(t.accountId.replaceAll('-', ''), 'hex'),
        Buffer.from([0, 0, 0, 16]),
        Buffer.from(list.replaceAll('-', ''), 'hex'),
        Buffer.from([0, 0, 0, 16]),
        value,
      ]);
      await conn`begin`;
      const attempt = transaction(conn, async () => {
        // The same record twice: the primary key refuses the second after the stream has ended.
        await copyInto(
          t.db.sql,
          conn,
          conn`copy suppression_records (account_id, list_id, value) from stdin (format binary)`,
          copyFraming(
            (async function* () {
              yield Buffer.concat([row, row]);
            })(),
          ),
        );
      });
      await expect(attempt).rejects.toThrow();
      expect(await stored(list)).toEqual([]);
      const [ok] = await conn<{ one: number }[]>`select 1 as one`;
      expect(ok!.one).toBe(1);
    } finally {
      conn.release();
    }
  }, 15_000);
});

describe('BucketSort', () => {
  async function sortAll(
    records: Buffer[],
    length: number,
  ): Promise<{ out: string[]; added: number; distinct: number }> {
    const sorter = await BucketSort.open(length, dir);
    try {
      const w = sorter.writable();
      // Tuples as recordRows gives them, in a few chunks.
      for (let i = 0; i < records.length; i += 333) {
        const tuples = records.slice(i, i + 333).map((r) => {
          const t = Buffer.alloc(6 + length);
          t.writeInt16BE(1, 0);
          t.writeInt32BE(length, 2);
          r.copy(t, 6);
          return t;
        });
        await new Promise<void>((resolve, reject) =>
          w.write(Buffer.concat(tuples), (e) => (e ? reject(e) : resolve())),
        );
      }
      await new Promise<void>((resolve) => w.end(resolve));
      const out: string[] = [];
      for await (const chunk of sorter.sorted())
        for (let o = 0; o < chunk.length; o += length) out.push(chunk.toString('hex', o, o + length));
      return { out, added: sorter.added, distinct: sorter.distinct };
    } finally {
      await sorter.close();
    }
  }

  test('emits the distinct records in ascending byte order', async () => {
    const records = Array.from({ length: 20_000 }, (_, i) =>
      createHash('md5')
        .update(String(i % 15_000))
        .digest(),
    );
    const { out, added, distinct } = await sortAll(records, 16);
    const expected = [...new Set(records.map((r) => r.toString('hex')))].sort();
    expect(out).toEqual(expected);
    expect({ added, distinct }).toEqual({ added: 20_000, distinct: 15_000 });
  });

  test('records equal in their first five bytes are ordered by the rest', async () => {
    const records = Array.from({ length: 3000 }, (_, i) => {
      const r = Buffer.alloc(64, 0xab);
      r.writeUInt32BE((i * 2654435761) >>> 0, 60);
      return r;
    });
    records.push(Buffer.from(records[7]!));
    const { out, distinct } = await sortAll(records, 64);
    expect(out).toEqual([...new Set(records.map((r) => r.toString('hex')))].sort());
    expect(distinct).toBe(3000);
  });

  test('no records, nothing out; the temp files are removed', async () => {
    expect(await sortAll([], 16)).toEqual({ out: [], added: 0, distinct: 0 });
    const { readdir } = await import('node:fs/promises');
    expect((await readdir(dir)).filter((f) => f.startsWith('suppression-import-'))).toEqual([]);
  });
});

describe('recordRows: the streaming line splitter', () => {
  /** The values of a binary COPY stream of one column, as hex. */
  function decodeCopy(buf: Buffer): string[] {
    expect(buf.subarray(0, 11).toString('latin1')).toBe('PGCOPY\n\xff\r\n\0');
    const values: string[] = [];
    let o = 19;
    for (;;) {
      const fields = buf.readInt16BE(o);
      if (fields === -1) break;
      expect(fields).toBe(1);
      const len = buf.readInt32BE(o + 2);
      values.push(buf.toString('hex', o + 6, o + 6 + len));
      o += 6 + len;
    }
    expect(o + 2).toBe(buf.length);
    return values;
  }

  async function rowsOf(
    format: 'md5' | 'plain text',
    pieces: Buffer[],
  ): Promise<{ values: string[]; counts: LineCounts }> {
    const counts: LineCounts = { valid: 0, malformed: 0 };
    const chunks: Buffer[] = [];
    async function* source() {
      yield* pieces;
    }
    for await (const c of copyFraming(recordRows(format, counts)(source()))) chunks.push(c);
    return { values: decodeCopy(Buffer.concat(chunks)), counts };
  }

  test('gives the same rows and counts however the file is cut into chunks', async () => {
    const text = Buffer.from(
      `\ufeff${md5('a')}\r\n"${md5('b').toUpperCase()}",x\n\n  \nbad line\n${md5('c')}  ,y\r\n${md5('d')}`,
      'utf8',
    );
    const whole = await rowsOf('md5', [text]);
    expect(whole.values).toEqual([md5('a'), md5('b'), md5('c'), md5('d')]);
    expect(whole.counts).toEqual({ valid: 4, malformed: 1 });
    for (const size of [1, 2, 3, 7, 33, 34]) {
      const pieces: Buffer[] = [];
      for (let i = 0; i < text.length; i += size) pieces.push(text.subarray(i, i + size));
      expect(await rowsOf('md5', pieces)).toEqual(whole);
    }
  });

  test('plain text rows are the UTF-8 bytes of the normalised address', async () => {
    const { values, counts } = await rowsOf('plain text', [Buffer.from(' A@B.co \nx@y.org')]);
    expect(values).toEqual([Buffer.from('a@b.co').toString('hex'), Buffer.from('x@y.org').toString('hex')]);
    expect(counts).toEqual({ valid: 2, malformed: 0 });
  });

  test('an empty file is a valid empty COPY stream', async () => {
    expect(await rowsOf('md5', [])).toEqual({ values: [], counts: { valid: 0, malformed: 0 } });
  });

  test('firstField takes the first CSV field without quotes or padding', () => {
    expect(firstField(' "Ann@Example.com",Ann ')).toBe('Ann@Example.com');
    expect(firstField('abc,def')).toBe('abc');
    expect(firstField('  abc  ')).toBe('abc');
    expect(firstField('"open')).toBe('open');
  });
});
