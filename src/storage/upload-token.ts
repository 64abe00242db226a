import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { link, mkdir, readFile, unlink, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';

/** What a local upload token grants: a PUT for one import until `expiresAt` (epoch seconds). */
export interface UploadGrant {
  accountId: string;
  importId: string;
  expiresAt: number;
}

const b64 = (b: Buffer | string) => Buffer.from(b).toString('base64url');
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * HMAC-signed upload tokens: base64url("accountId.importId.expiry") + "." + base64url(HMAC-SHA256).
 * The account id rides along so the upload handler can address the import by its primary key.
 * Nothing is stored per token, so any API replica sharing the secret accepts the upload.
 */
export class UploadTokens {
  constructor(private readonly secret: Buffer) {}

  sign(grant: UploadGrant): string {
    const payload = b64(`${grant.accountId}.${grant.importId}.${grant.expiresAt}`);
    return `${payload}.${this.mac(payload)}`;
  }

  /** The grant of a genuine token (expired or not), or undefined for a malformed or forged one. */
  verify(token: string): UploadGrant | undefined {
    const dot = token.indexOf('.');
    if (dot <= 0 || dot !== token.lastIndexOf('.')) return undefined;
    const payload = token.slice(0, dot);
    const given = Buffer.from(token.slice(dot + 1), 'base64url');
    const expected = Buffer.from(this.mac(payload), 'base64url');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
    const [accountId, importId, exp, ...rest] = Buffer.from(payload, 'base64url').toString('utf8').split('.');
    const expiresAt = Number(exp);
    if (rest.length || !accountId || !importId || !UUID.test(accountId) || !UUID.test(importId) || !Number.isSafeInteger(expiresAt)) return undefined;
    return { accountId, importId, expiresAt };
  }

  private mac(payload: string): string {
    return createHmac('sha256', this.secret).update(payload).digest('base64url');
  }
}

/**
 * The configured secret, or one generated once and kept at `path` (mode 0600) so every API process
 * on the machine signs and verifies alike. link() publishes the file atomically: a process racing
 * us either wins (we read its secret) or loses, never reads a half-written file.
 */
export async function loadUploadSecret(configured: string | undefined, path: string): Promise<Buffer> {
  if (configured) return Buffer.from(configured, 'utf8');
  const existing = await readSecret(path);
  if (existing) return existing;
  await mkdir(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}`;
  await writeFile(tmp, randomBytes(32).toString('hex') + '\n', { mode: 0o600, flag: 'wx' });
  try {
    await link(tmp, path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  } finally {
    await unlink(tmp).catch(() => {});
  }
  const secret = await readSecret(path);
  if (!secret) throw new Error(`upload secret file ${path} is empty`);
  return secret;
}

async function readSecret(path: string): Promise<Buffer | undefined> {
  try {
    const text = (await readFile(path, 'utf8')).trim();
    return text ? Buffer.from(text, 'utf8') : undefined;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}
