import { randomBytes, timingSafeEqual } from 'node:crypto';

/** Keys are `ck_<32 hex of the key id>_<secret>`; the secret is 32 random bytes, base64url. */
const KEY_PATTERN = /^ck_([0-9a-f]{32})_([A-Za-z0-9_-]{20,128})$/;

export function newKey(): { id: string; key: string; secretSha256: Buffer } {
  const id = crypto.randomUUID();
  const secret = randomBytes(32).toString('base64url');
  return { id, key: `ck_${id.replaceAll('-', '')}_${secret}`, secretSha256: sha256(secret) };
}

export function parseKey(key: string): { id: string; secret: string } | undefined {
  const match = KEY_PATTERN.exec(key);
  if (!match) return undefined;
  const hex = match[1]!;
  const id = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  return { id, secret: match[2]! };
}

export function sha256(text: string): Buffer {
  return Buffer.from(Bun.SHA256.hash(text) as Uint8Array);
}

/** Constant-time comparison of the presented secret's hash with the stored one. */
export function secretMatches(secret: string, storedSha256: Buffer): boolean {
  // Bun's one-shot hasher (the digest of the UTF-8 bytes, like createHash) in a quarter of the time:
  // every request hashes the presented secret.
  const presented = Bun.SHA256.hash(secret) as Uint8Array;
  return storedSha256.length === presented.length && timingSafeEqual(presented, storedSha256);
}
