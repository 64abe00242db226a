// The HTML living standard's valid-email rule, with a dotted domain required (DESIGN.md).
const LOCAL = /^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+$/;
const LABEL = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/;

/**
 * True for a trimmed address of at most 254 characters with one `@`, a valid local part and a
 * domain of at least two labels. Non-ASCII, spaces and control characters are refused.
 * @example isValidEmail('Ann@Example.com') // true
 */
export function isValidEmail(email: string): boolean {
  if (email.length === 0 || email.length > 254) return false;
  const at = email.indexOf('@');
  if (at <= 0 || at !== email.lastIndexOf('@')) return false;
  const local = email.slice(0, at);
  const domain = email.slice(at + 1);
  if (local.length > 64 || !LOCAL.test(local)) return false;
  const labels = domain.split('.');
  return labels.length >= 2 && labels.every((l) => LABEL.test(l));
}

/** The identity key: lowercased, trimmed address. */
export function normaliseEmail(email: string): string {
  return email.trim().toLowerCase();
}

/** md5 hex of the normalised address: the contact's `emailMd5`. */
export function emailMd5(email: string): string {
  // Bun's one-shot hasher: the digest of the UTF-8 bytes, as createHash gives it, for less (every
  // create hashes its email).
  return Bun.MD5.hash(normaliseEmail(email), 'hex');
}

/** `emailMd5` path values are case-insensitive hex; the database stores them as uuid. */
export function md5ToUuid(md5: string): string {
  const h = md5.toLowerCase();
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export function uuidToMd5(uuid: string): string {
  return uuid.replaceAll('-', '');
}

/** The read-only sub-attributes every `email`-type attribute expands into (DESIGN.md). */
export const DERIVED_SUB_KEYS = ['md5', 'sha256', 'sha512', 'domain'] as const;

/**
 * `name:md5`, `name:sha256`, `name:sha512` (of the lowercased address) and `name:domain`.
 * @example derivedOf('work', 'Ann@Example.com')['work:domain'] // 'example.com'
 */
export function derivedOf(name: string, address: string): Record<string, string> {
  const lower = normaliseEmail(address);
  // Bun's one-shot hashers: the same digests of the UTF-8 bytes as node:crypto's createHash, at less
  // than half the cost (every GET of a contact with an email attribute computes three).
  return {
    [`${name}:md5`]: Bun.MD5.hash(lower, 'hex'),
    [`${name}:sha256`]: Bun.SHA256.hash(lower, 'hex'),
    [`${name}:sha512`]: Bun.SHA512.hash(lower, 'hex'),
    [`${name}:domain`]: lower.slice(lower.lastIndexOf('@') + 1),
  };
}
