/**
 * Each account's client: a few lanes, each creating, patching and reading its own contacts (a
 * domain no import file uses) one request at a time, so "the last write" of a contact is well
 * defined. Every read is checked against what the writes before it said; the final states are
 * checked after the soak (verify.ts).
 */
import type { SoakAccount } from './accounts';
import { afterCreate, afterPatch, ContactModel, viewOf, type State } from './contacts-model';
import { is2xx, type Answer, type Recorder } from './http';
import { rngFor, type Rng } from './prng';

export const CLIENT_DOMAIN = 'client.example';

export interface Mismatch {
  account: number;
  email: string;
  when: string;
  got: State;
  expected: State[];
}

export interface Client {
  account: SoakAccount;
  contacts: ContactModel[];
  mismatches: Mismatch[];
}

export interface TrafficOptions {
  seed: number;
  lanes: number;
  contactsPerLane: number;
  /** Pause between a lane's requests, ms. */
  pause: [number, number];
}

export function client(account: SoakAccount, opts: TrafficOptions): Client {
  const contacts = Array.from(
    { length: opts.lanes * opts.contactsPerLane },
    (_, i) => new ContactModel(`c${i}@${CLIENT_DOMAIN}`),
  );
  return { account, contacts, mismatches: [] };
}

const md5 = (email: string) => new Bun.CryptoHasher('md5').update(email.toLowerCase()).digest('hex');

/** Runs every lane of the client until `until` (ms since the soak's start). */
export async function clientLoop(rec: Recorder, base: string, c: Client, opts: TrafficOptions, until: number) {
  await Promise.all(
    Array.from({ length: opts.lanes }, (_, lane) => {
      const mine = c.contacts.filter((_, i) => i % opts.lanes === lane);
      return laneLoop(rec, base, c, mine, rngFor(opts.seed, `lane-${c.account.index}-${lane}`), opts, until);
    }),
  );
}

async function laneLoop(
  rec: Recorder,
  base: string,
  c: Client,
  mine: ContactModel[],
  rng: Rng,
  opts: TrafficOptions,
  until: number,
) {
  const { index, key } = c.account;
  for (let n = 0; Date.now() - rec.t0 < until && !rec.halted && n < 1_000_000; n++) {
    const m = rng.pick(mine);
    const roll = rng.next();
    const v = rng.int(0, 1_000_000);
    let a: Answer;
    if (!m.mayExist() || roll < 0.25) {
      const attributes: Record<string, unknown> = { name: `c-${v}`, n: v };
      if (rng.next() < 0.5) attributes.tier = rng.pick(['gold', 'silver']);
      a = await rec.call(index, 'POST', `${base}/v1/contacts`, {
        key,
        json: { email: m.email, attributes, duplicateContactStrategy: 'overwrite' },
      });
      wrote(m, a, afterCreate(m.email, attributes));
    } else if (roll < 0.6) {
      const attributes = { n: v, tier: rng.next() < 0.3 ? null : rng.pick(['gold', 'silver', 'bronze']) };
      a = await rec.call(index, 'PATCH', `${base}/v1/contacts/${md5(m.email)}`, { key, json: { attributes } });
      wrote(m, a, afterPatch(attributes));
    } else {
      a = await rec.call(index, 'GET', `${base}/v1/contacts/${md5(m.email)}`, { key });
      read(c, m, a, `GET at ${(a.sent.start / 1000).toFixed(1)} s`);
    }
    if (a.status === 409) await Bun.sleep(Math.min(1_000, (a.retryAfter ?? 1) * 1000));
    else if (a.status === undefined || a.status >= 500) await Bun.sleep(200);
    else await Bun.sleep(rng.int(opts.pause[0], opts.pause[1]));
  }
}

function wrote(m: ContactModel, a: Answer, apply: (s: State) => State) {
  if (is2xx(a)) m.settle(viewOf(a.body as Record<string, unknown>));
  else if (a.status === 404) m.settle(null);
  else if (a.status === undefined || a.status >= 500) m.maybe(apply);
  // any other 4xx (409 operation_in_progress) changed nothing; a create the API sent again after its
  // session was lost that met its own first attempt answers that attempt's 201 (src/contacts/service.ts)
}

/** A read must show one of the states the writes allow; it then settles which. */
export function read(c: Client, m: ContactModel, a: Answer, when: string): boolean {
  let got: State;
  if (is2xx(a)) got = viewOf(a.body as Record<string, unknown>);
  else if (a.status === 404) got = null;
  else return false;
  if (!m.allows(got)) c.mismatches.push({ account: c.account.index, email: m.email, when, got, expected: m.possible });
  m.settle(got);
  return true;
}
