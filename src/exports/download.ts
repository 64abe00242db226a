import { createHmac, timingSafeEqual } from 'node:crypto';
import { join } from 'node:path';
import { GetObjectCommand } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { Config } from '../config';
import { S3Store } from '../storage/s3';
import type { ObjectStore } from '../storage/store';
import { loadUploadSecret } from '../storage/upload-token';

/** A download link is valid this long from the read that made it (and never past the file's retention). */
export const LINK_MS = 3600 * 1000;

export const DOWNLOADS = '/downloads/';

/** Where an export run writes its file: one object per run, so a run that lost its lease never replaces the file. */
export function exportObjectKey(accountId: string, exportId: string, attempt: number, gzip: boolean): string {
  return `contact-exports/${accountId}/${exportId}/${attempt}.csv${gzip ? '.gz' : ''}`;
}

/** The file name a download is saved as. */
export function exportFileName(exportId: string, gzip: boolean): string {
  return `contact-export-${exportId}.csv${gzip ? '.gz' : ''}`;
}

export interface DownloadGrant {
  accountId: string;
  exportId: string;
  /** epoch seconds */
  expiresAt: number;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
// Signed apart from upload tokens (same secret, another message): neither can stand for the other.
const PURPOSE = 'contact-export-download:';

/**
 * The local store's download links: `<PUBLIC_URL>/downloads/<token>`, the token an HMAC over the
 * export and the expiry with the store's upload secret, so any API replica sharing it serves the file.
 * On S3 a link is a presigned GET of the object.
 */
export class DownloadLinks {
  private secret: Promise<Buffer> | undefined;

  constructor(
    private readonly config: Config,
    private readonly storage: ObjectStore | undefined,
  ) {}

  async link(grant: DownloadGrant, key: string, gzip: boolean): Promise<string | undefined> {
    if (this.storage instanceof S3Store) {
      const expiresIn = Math.max(1, grant.expiresAt - Math.floor(Date.now() / 1000));
      const command = new GetObjectCommand({
        Bucket: this.storage.bucket,
        Key: key,
        ResponseContentDisposition: `attachment; filename="${exportFileName(grant.exportId, gzip)}"`,
      });
      return getSignedUrl(this.storage.signer, command, { expiresIn });
    }
    if (!this.storage) return undefined;
    return `${this.config.publicUrl}${DOWNLOADS}${await this.sign(grant)}`;
  }

  async sign(grant: DownloadGrant): Promise<string> {
    const payload = Buffer.from(`${grant.accountId}.${grant.exportId}.${grant.expiresAt}`).toString('base64url');
    return `${payload}.${await this.mac(payload)}`;
  }

  /** The grant of a genuine token (expired or not), or undefined; compared whole, as signed. */
  async verify(token: string): Promise<DownloadGrant | undefined> {
    const dot = token.indexOf('.');
    if (dot <= 0 || dot !== token.lastIndexOf('.')) return undefined;
    const [accountId, exportId, exp, ...rest] = Buffer.from(token.slice(0, dot), 'base64url').toString().split('.');
    if (rest.length || !UUID.test(accountId ?? '') || !UUID.test(exportId ?? '') || !/^[0-9]{1,15}$/.test(exp ?? ''))
      return undefined;
    const grant = { accountId: accountId!, exportId: exportId!, expiresAt: Number(exp) };
    const given = Buffer.from(token);
    const genuine = Buffer.from(await this.sign(grant));
    return given.length === genuine.length && timingSafeEqual(given, genuine) ? grant : undefined;
  }

  private async mac(payload: string): Promise<string> {
    const s = this.config.storage;
    this.secret ??= loadUploadSecret(
      s.driver === 'local' ? s.uploadSecret : undefined,
      join(this.config.dataDir, 'upload-secret'),
    );
    return createHmac('sha256', await this.secret)
      .update(PURPOSE + payload)
      .digest('base64url');
  }
}
