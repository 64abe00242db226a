/**
 * What the client knows of each of its contacts: the states it may be in now. A 2xx write says
 * exactly (its answer); a write answered 5xx or not at all may or may not have landed, so both the
 * state before it and the one it would have made stay possible until a later answer settles it.
 */
export interface View {
  email: string;
  attributes: Record<string, unknown>;
  brandIds: string[];
  enabled: boolean;
}

/** null: the contact does not exist. */
export type State = View | null;

const key = (s: State) =>
  s === null
    ? 'absent'
    : JSON.stringify([
        s.email,
        Object.entries(s.attributes).sort(([a], [b]) => a.localeCompare(b)),
        [...s.brandIds].sort(),
        s.enabled,
      ]);

export const viewOf = (body: Record<string, unknown>): View => ({
  email: String(body.email),
  attributes: (body.attributes as Record<string, unknown>) ?? {},
  brandIds: (body.brandIds as string[]) ?? [],
  enabled: body.enabled as boolean,
});

export class ContactModel {
  possible: State[] = [null];
  /** Times a write left the state uncertain. */
  uncertainWrites = 0;

  constructor(readonly email: string) {}

  get certain(): boolean {
    return this.possible.length === 1;
  }

  mayExist(): boolean {
    return this.possible.some((s) => s !== null);
  }

  settle(s: State): void {
    this.possible = [s];
  }

  /** A write with no clear outcome: each possible state, and what the write would have made of it. */
  maybe(apply: (s: State) => State): void {
    this.uncertainWrites++;
    const all = [...this.possible, ...this.possible.map(apply)];
    this.possible = [...new Map(all.map((s) => [key(s), s])).values()];
  }

  /** Whether `got` is one of the possible states. */
  allows(got: State): boolean {
    return this.possible.some((s) => key(s) === key(got));
  }
}

/** POST /v1/contacts with `overwrite`: every attribute sent is set, the rest kept; a new contact otherwise. */
export const afterCreate =
  (email: string, attributes: Record<string, unknown>) =>
  (s: State): State =>
    s === null
      ? { email, attributes: { ...attributes }, brandIds: [], enabled: true }
      : { ...s, attributes: { ...s.attributes, ...attributes } };

/** PATCH (RFC 7386): a value sets, null removes; a contact that does not exist stays so (404). */
export const afterPatch =
  (attributes: Record<string, unknown>) =>
  (s: State): State => {
    if (s === null) return null;
    const next = { ...s.attributes };
    for (const [k, v] of Object.entries(attributes)) {
      if (v === null) delete next[k];
      else next[k] = v;
    }
    return { ...s, attributes: next };
  };
