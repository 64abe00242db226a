// POST /v1/contacts for an email that exists: every row of the spec's two strategy tables
// (enabled contact; disabled contact with restoreDisabled), with brands and events counted exactly.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test';
import { expectProblem } from '../helpers/app';
import { createAttribute, createBrand } from '../helpers/fixtures';
import {
  CONTACT_PATHS,
  type ContactTestApp,
  contactTestApp,
  create,
  disable,
  eventsOf,
  expectContactPath,
  md5,
  rowOf,
} from './contacts-support';

let t: ContactTestApp;
let b1: string;
let b2: string;
let b3: string;
let n = 0;

const post = (body: Record<string, unknown>) => t.call('POST', '/v1/contacts', { body });

/** An existing contact: city Oslo, age 30, vip unanswered, brand b1 (its event already counted). */
async function existing(opts: { disabled?: boolean } = {}) {
  const email = `m.${++n}@example.com`;
  await create(t, { email, attributes: { city: 'Oslo', age: 30 }, brandIds: [b1] });
  if (opts.disabled) await disable(t, email);
  return email;
}

/** Events recorded after the contact was set up (its first event, for b1, left out). */
const newEvents = async (email: string) => (await eventsOf(t, email)).slice(1);

for (const path of CONTACT_PATHS) {
  describe(`${path} path`, () => {
    beforeAll(async () => {
      t = await contactTestApp(path);
      for (const [name, type] of [
        ['city', 'string'],
        ['age', 'number'],
        ['vip', 'boolean'],
        ['tags', 'array'],
      ] as const) {
        await createAttribute(t.db.sql, t.accountId, name, type);
      }
      b1 = await createBrand(t.db.sql, t.accountId, 'One');
      b2 = await createBrand(t.db.sql, t.accountId, 'Two');
      b3 = await createBrand(t.db.sql, t.accountId, 'Three');
    });
    afterAll(() => t.close());

    describe('existing enabled contact', () => {
      test('strategy omitted: 409 contact_exists, nothing changes', async () => {
        const email = await existing();
        const before = await rowOf(t, email);
        expectProblem(await post({ email, attributes: { city: 'Rome' }, brandIds: [b2] }), 409, 'contact_exists');
        expect(await rowOf(t, email)).toEqual(before);
        expect(await newEvents(email)).toEqual([]);
      });

      test('overwrite: sent attributes set or replaced, rest kept; brandIds added; events of new brands', async () => {
        const email = await existing();
        const res = await post({
          email,
          duplicateContactStrategy: 'overwrite',
          attributes: { city: 'Rome', vip: false },
          brandIds: [b1, b2],
        });
        expect(res.status).toBe(200);
        expect(res.body.attributes).toEqual({ city: 'Rome', age: 30, vip: false });
        expect(res.body.brandIds).toEqual([b1, b2]);
        expect(res.body.enabled).toBe(true);
        expect(await newEvents(email)).toEqual([b2]);
      });

      test('overwrite with overwriteBrands: brandIds replace the brands', async () => {
        const email = await existing();
        const res = await post({
          email,
          duplicateContactStrategy: 'overwrite',
          overwriteBrands: true,
          brandIds: [b3, b2],
        });
        expect(res.status).toBe(200);
        expect(res.body.brandIds).toEqual([b3, b2]);
        expect(await newEvents(email)).toEqual([b3, b2]);
      });

      test('overwrite with overwriteBrands and an empty brandIds removes every brand, without events', async () => {
        const email = await existing();
        const res = await post({ email, duplicateContactStrategy: 'overwrite', overwriteBrands: true, brandIds: [] });
        expect(res.body.brandIds).toEqual([]);
        expect(await newEvents(email)).toEqual([]);
      });

      test('overwrite with overwriteBrands but no brandIds leaves the brands alone', async () => {
        const email = await existing();
        const res = await post({
          email,
          duplicateContactStrategy: 'overwrite',
          overwriteBrands: true,
          attributes: { age: 31 },
        });
        expect(res.body.brandIds).toEqual([b1]);
        expect(res.body.attributes).toEqual({ city: 'Oslo', age: 31 });
      });

      test('overwrite: an empty string never clears a value', async () => {
        const email = await existing();
        const res = await post({ email, duplicateContactStrategy: 'overwrite', attributes: { city: '', age: '' } });
        expect(res.status).toBe(200);
        expect(res.body.attributes).toEqual({ city: 'Oslo', age: 30 });
      });

      test('overwrite with publishBrandSubscribeEvents false adds brands without events', async () => {
        const email = await existing();
        const res = await post({
          email,
          duplicateContactStrategy: 'overwrite',
          brandIds: [b2],
          publishBrandSubscribeEvents: false,
        });
        expect(res.body.brandIds).toEqual([b1, b2]);
        expect(await newEvents(email)).toEqual([]);
      });

      test('keep: only blank attributes are filled; brandIds added; overwriteBrands is ignored', async () => {
        const email = await existing();
        const res = await post({
          email,
          duplicateContactStrategy: 'keep',
          overwriteBrands: true,
          attributes: { city: 'Rome', vip: 'yes', tags: ['x'] },
          brandIds: [b2],
        });
        expect(res.status).toBe(200);
        expect(res.body.attributes).toEqual({ city: 'Oslo', age: 30, vip: true, tags: ['x'] });
        expect(res.body.brandIds).toEqual([b1, b2]);
        expect(await newEvents(email)).toEqual([b2]);
      });

      test('skip: the contact is left as is and returned with 200; brands untouched, no events', async () => {
        const email = await existing();
        const before = await rowOf(t, email);
        const res = await post({
          email,
          duplicateContactStrategy: 'skip',
          overwriteBrands: true,
          attributes: { city: 'Rome', vip: true },
          brandIds: [b2],
        });
        expect(res.status).toBe(200);
        expect(res.body.attributes).toEqual({ city: 'Oslo', age: 30 });
        expect(res.body.brandIds).toEqual([b1]);
        expect(await rowOf(t, email)).toEqual(before);
        expect(await newEvents(email)).toEqual([]);
      });

      test('restoreDisabled on an enabled contact changes nothing about the strategy', async () => {
        const email = await existing();
        const res = await post({
          email,
          duplicateContactStrategy: 'keep',
          restoreDisabled: true,
          attributes: { city: 'Rome' },
        });
        expect(res.status).toBe(200);
        expect(res.body).toMatchObject({ enabled: true, attributes: { city: 'Oslo', age: 30 } });
      });

      test('a merge that changes nothing does not rewrite the row', async () => {
        const email = await existing();
        const before = await t.db.sql`select updated_at from contacts where email = ${email}`;
        const res = await post({
          email,
          duplicateContactStrategy: 'overwrite',
          attributes: { city: 'Oslo' },
          brandIds: [b1],
        });
        expect(res.status).toBe(200);
        expect(await t.db.sql`select updated_at from contacts where email = ${email}`).toEqual(before);
      });

      test('the identity is case-insensitive; the email stays as first sent', async () => {
        const email = await existing();
        const res = await post({
          email: ` ${email.toUpperCase()} `,
          duplicateContactStrategy: 'overwrite',
          attributes: { age: 1 },
        });
        expect(res.status).toBe(200);
        expect(res.body.email).toBe(email);
        expect(res.body.emailMd5).toBe(md5(email));
      });

      test('hidden fields are never changed by a merge', async () => {
        const email = await existing();
        const importId = crypto.randomUUID();
        await t.db
          .sql`update contacts set hard_bounced = true, hard_bounced_at = '2020-01-01', created_at = '2019-05-05',
          first_source = 'import', first_import_id = ${importId}, first_import_method = 'manual'
          where email = ${email}`;
        for (const body of [
          {
            duplicateContactStrategy: 'overwrite',
            attributes: { city: 'Rome' },
            overwriteBrands: true,
            brandIds: [b2],
          },
          { duplicateContactStrategy: 'keep', attributes: { vip: true } },
        ]) {
          const res = await post({ email, ...body });
          expect(res.status).toBe(200);
          expect(res.body.createdAt).toBe('2019-05-05T00:00:00.000Z');
        }
        expect(await rowOf(t, email)).toMatchObject({
          hard_bounced: true,
          hard_bounced_at: new Date('2020-01-01'),
          created_at: new Date('2019-05-05'),
          first_source: 'import',
          first_import_id: importId,
          first_import_method: 'manual',
        });
      });

      test('a stored value that is not an object (written by other hands) counts as {}', async () => {
        for (const stored of ['null', '["a", 1]', '"text"', '5']) {
          const email = await existing();
          await t.db.sql`update contacts set attributes = ${stored}::jsonb where email = ${email}`;
          const res = await post({ email, duplicateContactStrategy: 'overwrite', attributes: { city: 'Rome' } });
          expect(res.status).toBe(200);
          expect(res.body.attributes).toEqual({ city: 'Rome' });
          expect((await rowOf(t, email))!.attributes).toEqual({ city: 'Rome' });
        }
      });
    });

    describe('existing disabled contact', () => {
      for (const strategy of [undefined, 'overwrite', 'keep', 'skip']) {
        for (const restoreDisabled of [undefined, false]) {
          const name = `strategy ${strategy ?? 'omitted'}, restoreDisabled ${restoreDisabled}`;
          test(`${name}: 409 contact_exists, stays disabled`, async () => {
            const email = await existing({ disabled: true });
            const before = await rowOf(t, email);
            const body: Record<string, unknown> = { email, attributes: { city: 'Rome' }, brandIds: [b2] };
            if (strategy) body.duplicateContactStrategy = strategy;
            if (restoreDisabled !== undefined) body.restoreDisabled = restoreDisabled;
            expectProblem(await post(body), 409, 'contact_exists');
            expect(await rowOf(t, email)).toEqual(before);
            expect(await newEvents(email)).toEqual([]);
          });
        }
      }

      test('restore with overwrite: enabled; attributes and brands as for overwrite', async () => {
        const email = await existing({ disabled: true });
        const res = await post({
          email,
          restoreDisabled: true,
          duplicateContactStrategy: 'overwrite',
          attributes: { city: 'Rome' },
          brandIds: [b2],
        });
        expect(res.status).toBe(200);
        expect(res.body).toMatchObject({ enabled: true, attributes: { city: 'Rome', age: 30 }, brandIds: [b1, b2] });
        expect(await newEvents(email)).toEqual([b2]);
      });

      test('restore with overwrite and overwriteBrands: brands replaced', async () => {
        const email = await existing({ disabled: true });
        const res = await post({
          email,
          restoreDisabled: true,
          duplicateContactStrategy: 'overwrite',
          overwriteBrands: true,
          brandIds: [b2],
        });
        expect(res.body).toMatchObject({ enabled: true, brandIds: [b2] });
        expect(await newEvents(email)).toEqual([b2]);
      });

      test('restore with keep: enabled; blanks filled, values kept; brands added', async () => {
        const email = await existing({ disabled: true });
        const res = await post({
          email,
          restoreDisabled: true,
          duplicateContactStrategy: 'keep',
          attributes: { city: 'Rome', vip: false },
          brandIds: [b1, b3],
        });
        expect(res.status).toBe(200);
        expect(res.body).toMatchObject({
          enabled: true,
          attributes: { city: 'Oslo', age: 30, vip: false },
          brandIds: [b1, b3],
        });
        expect(await newEvents(email)).toEqual([b3]);
      });

      test('restore with skip: only the attributes sent are kept, others cleared; brands become brandIds', async () => {
        const email = await existing({ disabled: true });
        const res = await post({
          email,
          restoreDisabled: true,
          duplicateContactStrategy: 'skip',
          attributes: { vip: true, city: '' },
          brandIds: [b2, b3],
        });
        expect(res.status).toBe(200);
        expect(res.body).toMatchObject({ enabled: true, attributes: { vip: true }, brandIds: [b2, b3] });
        expect((await rowOf(t, email))!.attributes).toEqual({ vip: true });
        expect(await newEvents(email)).toEqual([b2, b3]);
      });

      test('restore with skip and no brandIds: brands kept; no attributes sent clears them all', async () => {
        const email = await existing({ disabled: true });
        const res = await post({ email, restoreDisabled: true, duplicateContactStrategy: 'skip' });
        expect(res.body).toMatchObject({ enabled: true, attributes: {}, brandIds: [b1] });
        expect(await newEvents(email)).toEqual([]);
      });

      test('restore with skip and brandIds keeping one: only the new brand gets an event', async () => {
        const email = await existing({ disabled: true });
        const res = await post({
          email,
          restoreDisabled: true,
          duplicateContactStrategy: 'skip',
          brandIds: [b1, b2],
          publishBrandSubscribeEvents: true,
        });
        expect(res.body.brandIds).toEqual([b1, b2]);
        expect(await newEvents(email)).toEqual([b2]);
      });

      test('restore with publishBrandSubscribeEvents false: no events', async () => {
        const email = await existing({ disabled: true });
        const res = await post({
          email,
          restoreDisabled: true,
          duplicateContactStrategy: 'overwrite',
          brandIds: [b2],
          publishBrandSubscribeEvents: false,
        });
        expect(res.body).toMatchObject({ enabled: true, brandIds: [b1, b2] });
        expect(await newEvents(email)).toEqual([]);
      });

      test('a restored contact keeps its first-added date and hidden fields', async () => {
        const email = await existing({ disabled: true });
        const before = await rowOf(t, email);
        const res = await post({ email, restoreDisabled: true, duplicateContactStrategy: 'skip' });
        expect(res.body.createdAt).toBe(before!.created_at.toISOString());
        expect(await rowOf(t, email)).toMatchObject({
          created_at: before!.created_at,
          first_source: 'api',
          hard_bounced: false,
        });
      });
    });

    test('the requests took the path', () => expectContactPath(t));
  });
}
