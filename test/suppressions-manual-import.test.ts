// Manual suppression imports (the admin CLI's `suppression-import`): files, counts, the list hold.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AdminError, UsageError } from '../src/cli/admin/args';
import { suppressionImportCommand } from '../src/cli/admin/suppression-import';
import { ApiError } from '../src/errors';
import { holdList } from '../src/suppressions/list-guard';
import { runManualSuppressionImport } from '../src/suppressions/manual-import';
import { copyRows, firstField, type LineCounts } from '../src/suppressions/record-lines';
import { expectProblem, testApp, type TestApp } from './helpers/app';
import { createAccount, createSuppressionList } from './helpers/fixtures';

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

const newList = (format: 'plain text' | 'md5' | 'sha512') => createSuppressionList(t.db.sql, t.accountId, `list ${crypto.randomUUID()}`, format);
const run = (listId: string, file: string) => runManualSuppressionImport(t.db.sql, { accountId: t.accountId, listId, file });

async function stored(listId: string): Promise<string[]> {
  const rows = await t.db.sql<{ v: string }[]>`
    select encode(value, 'hex') as v from suppression_records where account_id = ${t.accountId} and list_id = ${listId} order by value`;
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
    expect(result).toEqual({ id: expect.any(String), totalCount: 6, addedCount: 4, duplicateCount: 2, malformedCount: 3 });
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

describe('runManualSuppressionImport: other formats', () => {
  test('sha512: 64 raw bytes per record', async () => {
    const list = await newList('sha512');
    const result = await run(list, await fileOf(`${sha512('a').toUpperCase()}\n${md5('a')}\n${sha512('b')},x\n`));
    expect(result).toMatchObject({ totalCount: 2, addedCount: 2, duplicateCount: 0, malformedCount: 1 });
    expect(await stored(list)).toEqual([sha512('a'), sha512('b')].sort());
  });

  test('plain text: addresses trimmed and lowercased, the CSV first column, invalid ones malformed', async () => {
    const list = await newList('plain text');
    const file = await fileOf('email,name\r\n Ann@Example.com ,Ann\r\n"bob@example.org","Bob, Jr"\r\nann@example.COM\r\nnot an address\r\nx@localhost\r\n');
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
    const holder = holdList(t.db.sql, { accountId: t.accountId, listId: list, method: 'api', estimatedSeconds: 1, describeFailure: () => 'x' }, async () => {
      started();
      await released;
    });
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

  test('while a manual import runs, add-records gets a 409 with Retry-After and the import shows importing', async () => {
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
    expect((await t.call('POST', `/v1/suppression-lists/${list}/records`, { body: { records: [md5('api')] } })).status).toBe(200);
  });

  test('an import whose connection dies applies nothing; the next import marks it failed', async () => {
    const list = await newList('md5');
    const fifo = join(dir, `fifo${files++}`);
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    const importing = run(list, fifo).catch((e: unknown) => e);
    const writer = createWriteStream(fifo);
    writer.write(`${md5('lost')}\n`);
    let pid: number | undefined;
    for (let i = 0; i < 200 && !pid; i++) {
      const [row] = await t.db.sql<{ pid: number }[]>`
        select pid from pg_stat_activity where datname = current_database() and query ilike 'copy suppression_import_staging%'`;
      pid = row?.pid;
      if (!pid) await Bun.sleep(10);
    }
    expect(pid).toBeDefined();
    await t.db.sql`select pg_terminate_backend(${pid!})`;
    // The pipe's writer goes on and finishes; the import must still fail, not hang.
    writer.end(`${md5('more')}\n`);
    expect(await importing).toBeInstanceOf(Error);
    expect(await stored(list)).toEqual([]);
    expect((await t.call('POST', `/v1/suppression-lists/${list}/records`, { body: { records: [md5('after')] } })).status).toBe(200);
    const hist = (await t.call('GET', `/v1/suppression-lists/${list}/imports`)).body.data;
    expect(hist.map((i: { method: string; status: string }) => `${i.method} ${i.status}`)).toEqual(['api completed', 'manual failed']);
    expect((await t.call('GET', `/v1/suppression-lists/${list}`)).body.recordCount).toBe(1);
  });
});

describe('runManualSuppressionImport: refusals before anything starts', () => {
  test('an unknown list is not_found, an unreadable file a clear error; no import is recorded', async () => {
    const list = await newList('md5');
    const missing = await runManualSuppressionImport(t.db.sql, { accountId: t.accountId, listId: NOBODY, file: await fileOf('x\n') }).catch((e: unknown) => e);
    expect((missing as ApiError).code).toBe('not_found_error');
    await expect(run(list, join(dir, 'nope.csv'))).rejects.toThrow(/cannot read .*nope\.csv/);
    await expect(run(list, dir)).rejects.toThrow(/directory/);
    expect((await t.call('GET', `/v1/suppression-lists/${list}/imports`)).body.data).toEqual([]);
  });
});

describe('suppressionImportCommand (admin CLI)', () => {
  test('imports and returns the id and counts', async () => {
    const list = await newList('md5');
    const out = await suppressionImportCommand(t.db.sql, { account: t.accountId.toUpperCase(), list, file: await fileOf(`${md5('1')}\n${md5('2')}\nbad\n`) });
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

  test('an unknown list, or one of another account, and an unreadable file are AdminErrors', async () => {
    const other = await createAccount(t.db.sql, 'other');
    const theirs = await createSuppressionList(t.db.sql, other, 'theirs', 'md5');
    const file = await fileOf(`${md5('1')}\n`);
    for (const list of [NOBODY, theirs]) {
      const error = await suppressionImportCommand(t.db.sql, { account: t.accountId, list, file }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(AdminError);
      expect((error as Error).message).toContain(list);
    }
    const mine = await newList('md5');
    const unreadable = await suppressionImportCommand(t.db.sql, { account: t.accountId, list: mine, file: join(dir, 'missing') }).catch((e: unknown) => e);
    expect(unreadable).toBeInstanceOf(AdminError);
    expect((unreadable as Error).message).toMatch(/cannot read/);
  });
});

describe('copyRows: the streaming line splitter', () => {
  async function rowsOf(format: 'md5' | 'plain text', pieces: Buffer[]): Promise<{ out: string; counts: LineCounts }> {
    const counts: LineCounts = { valid: 0, malformed: 0 };
    const chunks: Buffer[] = [];
    async function* source() {
      yield* pieces;
    }
    for await (const c of copyRows(format, counts)(source())) chunks.push(c);
    return { out: Buffer.concat(chunks).toString('latin1'), counts };
  }

  test('gives the same rows and counts however the file is cut into chunks', async () => {
    const text = Buffer.from(
      `\ufeff${md5('a')}\r\n"${md5('b').toUpperCase()}",x\n\n  \nbad line\n${md5('c')}  ,y\r\n${md5('d')}`,
      'utf8',
    );
    const whole = await rowsOf('md5', [text]);
    expect(whole.out).toBe([md5('a'), md5('b'), md5('c'), md5('d')].map((h) => `${h}\n`).join(''));
    expect(whole.counts).toEqual({ valid: 4, malformed: 1 });
    for (const size of [1, 2, 3, 7, 33, 34]) {
      const pieces: Buffer[] = [];
      for (let i = 0; i < text.length; i += size) pieces.push(text.subarray(i, i + size));
      expect(await rowsOf('md5', pieces)).toEqual(whole);
    }
  });

  test('plain text rows are bytea hex of the normalised address, escaped for COPY', async () => {
    const { out, counts } = await rowsOf('plain text', [Buffer.from(' A@B.co \n')]);
    expect(out).toBe(`\\\\x${Buffer.from('a@b.co').toString('hex')}\n`);
    expect(counts).toEqual({ valid: 1, malformed: 0 });
  });

  test('firstField takes the first CSV field without quotes or padding', () => {
    expect(firstField(' "Ann@Example.com",Ann ')).toBe('Ann@Example.com');
    expect(firstField('abc,def')).toBe('abc');
    expect(firstField('  abc  ')).toBe('abc');
    expect(firstField('"open')).toBe('open');
  });
});
