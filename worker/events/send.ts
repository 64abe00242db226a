import type { Outcome } from '../../src/metrics/webhooks';
import { signDelivery } from './sign';

/** What src/webhooks/url-safety.ts answers for an endpoint's URL. */
export type UrlCheck = { ok: true; url: URL } | { ok: false; reason: string; transient?: true };
export type CheckUrl = (url: string, allowPrivate: boolean) => Promise<UrlCheck>;

export interface Attempt {
  url: string;
  secret: string;
  /** The batch's webhook-id: the same on every attempt of the batch. */
  id: string;
  body: string;
}

export interface SendOptions {
  timeoutMs: number;
  allowPrivate: boolean;
  checkUrl: CheckUrl;
}

export interface Sent {
  outcome: Outcome;
  /** Why it failed, short enough for last_failure_reason and the endpoint's API view. */
  reason?: string;
}

export const USER_AGENT = 'contact-service-webhooks/1';

/** What of a receiver's answer is read at most; the rest is dropped unread. */
const BODY_CAP = 4_096;

/**
 * One POST of a batch, signed for this attempt's time. The URL is checked again before every
 * attempt (its name may resolve elsewhere since the endpoint was made); a redirect is not followed;
 * the answer must come within `timeoutMs`. Never throws: every way it can end is an Outcome.
 */
export async function sendAttempt(attempt: Attempt, opts: SendOptions): Promise<Sent> {
  const checked = await opts
    .checkUrl(attempt.url, opts.allowPrivate)
    .catch((e: unknown): UrlCheck => ({ ok: false, reason: `the URL could not be checked: ${short(e)}` }));
  // A name that could not be resolved just now is a network failure; anything else is refused.
  if (!checked.ok) return { outcome: checked.transient ? 'network_error' : 'refused_address', reason: checked.reason };
  const timestamp = Math.floor(Date.now() / 1000);
  let res: Response;
  try {
    res = await fetch(checked.url, {
      method: 'POST',
      body: attempt.body,
      redirect: 'manual',
      signal: AbortSignal.timeout(opts.timeoutMs),
      headers: {
        'content-type': 'application/json',
        'user-agent': USER_AGENT,
        'webhook-id': attempt.id,
        'webhook-timestamp': String(timestamp),
        'webhook-signature': signDelivery(attempt.secret, attempt.id, timestamp, attempt.body),
      },
    });
  } catch (e) {
    return failure(e, opts.timeoutMs);
  }
  // A hostile receiver may answer with an endless body: a few KB are read so the connection can be
  // kept, the rest is dropped.
  await drain(res);
  if (res.status >= 200 && res.status < 300) return { outcome: 'success' };
  if (res.status >= 300 && res.status < 400)
    return { outcome: 'redirect', reason: `redirect not followed (HTTP ${res.status})` };
  return { outcome: 'http_error', reason: `HTTP ${res.status}` };
}

function failure(e: unknown, timeoutMs: number): Sent {
  const err = e as { name?: string; code?: string };
  if (err?.name === 'TimeoutError' || err?.name === 'AbortError')
    return { outcome: 'timeout', reason: `timed out after ${seconds(timeoutMs)}` };
  const reason =
    err?.code === 'ECONNREFUSED'
      ? 'connection refused'
      : err?.code === 'ENOTFOUND'
        ? 'host not found'
        : err?.code === 'ECONNRESET'
          ? 'connection reset'
          : `connection failed: ${short(e)}`;
  return { outcome: 'network_error', reason };
}

async function drain(res: Response): Promise<void> {
  const reader = res.body?.getReader();
  if (!reader) return;
  try {
    let read = 0;
    while (read <= BODY_CAP) {
      const { done, value } = await reader.read();
      if (done) return;
      read += value.byteLength;
    }
    await reader.cancel();
  } catch {
    // A body cut or timed out after the status came: the status is the answer.
  }
}

const seconds = (ms: number) => (ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`);

function short(e: unknown): string {
  const text = e instanceof Error ? e.message : String(e);
  return text.split('\n')[0]!.slice(0, 200);
}
