import type { Attributes } from './attributes';

export type Strategy = 'overwrite' | 'keep' | 'skip';

export interface StoredState {
  attributes: Attributes;
  brandIds: string[];
  enabled: boolean;
}

export interface MergeRequest {
  /** Attributes sent, already typed; empty values are not here (they count as not sent). */
  attributes: Attributes;
  /** Brand ids sent, without repeats; undefined when `brandIds` was not sent. */
  brandIds: string[] | undefined;
  strategy: Strategy | undefined;
  overwriteBrands: boolean;
  restoreDisabled: boolean;
}

export type MergeOutcome =
  | { kind: 'conflict'; detail: string }
  | { kind: 'unchanged' }
  | { kind: 'update'; next: StoredState; addedBrandIds: string[] };

/** Existing brands first, in their order, then the new ones in the order sent. */
export const unionOf = (current: readonly string[], sent: readonly string[]) => [
  ...current,
  ...sent.filter((id) => !current.includes(id)),
];

const sameAttributes = (a: Attributes, b: Attributes) => {
  const keys = Object.keys(a);
  // Own keys only: `in` also finds what every object inherits (`toString`, `constructor`, …).
  return (
    keys.length === Object.keys(b).length &&
    keys.every((k) => Object.hasOwn(b, k) && JSON.stringify(a[k]) === JSON.stringify(b[k]))
  );
};

/**
 * The spec's two strategy tables for an email that already exists (POST /v1/contacts, rules 4–6).
 * Pure: the caller holds the row lock and writes `next` when the outcome is an update.
 */
export function mergeInto(stored: StoredState, req: MergeRequest): MergeOutcome {
  if (!stored.enabled && !req.restoreDisabled) {
    return {
      kind: 'conflict',
      detail:
        'A disabled contact has this email. ' +
        'Send restoreDisabled: true with a duplicateContactStrategy to enable it again.',
    };
  }
  if (!req.strategy) {
    return {
      kind: 'conflict',
      detail:
        'A contact with this email exists. Send duplicateContactStrategy (overwrite, keep or skip) to merge into it.',
    };
  }
  const sent = req.brandIds ?? [];
  let next: StoredState;
  switch (req.strategy) {
    case 'overwrite':
      next = {
        attributes: { ...stored.attributes, ...req.attributes },
        // overwriteBrands replaces only when brandIds is sent; without brandIds there is nothing to replace with.
        brandIds: req.overwriteBrands && req.brandIds ? req.brandIds : unionOf(stored.brandIds, sent),
        enabled: true,
      };
      break;
    case 'keep':
      next = {
        attributes: { ...req.attributes, ...stored.attributes },
        brandIds: unionOf(stored.brandIds, sent),
        enabled: true,
      };
      break;
    case 'skip':
      if (stored.enabled) return { kind: 'unchanged' };
      // Restoring with skip: the contact becomes what was sent; brands are replaced only when sent.
      next = { attributes: { ...req.attributes }, brandIds: req.brandIds ?? stored.brandIds, enabled: true };
      break;
  }
  const unchanged =
    next.enabled === stored.enabled &&
    sameAttributes(next.attributes, stored.attributes) &&
    next.brandIds.length === stored.brandIds.length &&
    next.brandIds.every((id, i) => id === stored.brandIds[i]);
  if (unchanged) return { kind: 'unchanged' };
  return { kind: 'update', next, addedBrandIds: next.brandIds.filter((id) => !stored.brandIds.includes(id)) };
}
