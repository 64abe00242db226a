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

  /**
   * The grant of a genuine token (expired or not), or undefined for a malformed or forged one. A token
   * is genuine only in the one spelling `sign` gives it: base64url decoding ignores padding, stray
   * characters and the spare low bits of the last character, so comparing decoded MACs accepted
   * several spellings of one token. The token is read, signed again and compared whole.
   */
  verify(token: string): UploadGrant | undefined {
    const dot = token.indexOf('.');
    if (dot <= 0 || dot !== token.lastIndexOf('.')) return undefined;
    const [accountId, importId, exp, ...rest] = Buffer.from(token.slice(0, dot), 'base64url')
      .toString('utf8')
      .split('.');
    if (
      rest.length ||
      !accountId ||
      !importId ||
      !UUID.test(accountId) ||
      !UUID.test(importId) ||
      !/^[0-9]{1,15}$/.test(exp ?? '')
    )
      return undefined;
    const grant = { accountId, importId, expiresAt: Number(exp) };
    const given = Buffer.from(token, 'utf8');
    const genuine = Buffer.from(this.sign(grant), 'utf8');
    if (given.length !== genuine.length || !timingSafeEqual(given, genuine)) return undefined;
    return grant;
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
