import { log } from '../../src/log';
import type { Outcome } from '../../src/metrics/webhooks';
import { pinnedPost } from './pinned-post';
import { signDelivery } from './sign';

/** What src/webhooks/url-safety.ts answers for an endpoint's URL. */
export type UrlCheck =
  { ok: true; url: URL; addresses: string[] } | { ok: false; reason: string; detail?: string; transient?: true };
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
 * attempt (its name may resolve elsewhere since the endpoint was made), and the POST goes to the
 * addresses that check passed and to no other (worker/events/pinned-post.ts); a redirect is not
 * followed; the answer must come within `timeoutMs`. Never throws: every way it can end is an Outcome.
 *
 * A refused URL's reason is the check's, which names no address or port (URL_NOT_ALLOWED): nothing
 * refused is ever connected to, so the endpoint's last failure cannot tell an internal port's state.
 */
export async function sendAttempt(attempt: Attempt, opts: SendOptions): Promise<Sent> {
  const checked = await opts
    .checkUrl(attempt.url, opts.allowPrivate)
    .catch((e: unknown): UrlCheck => ({ ok: false, reason: `the URL could not be checked: ${short(e)}` }));
  if (!checked.ok) {
    // The cause for operators, by the batch's webhook-id (the endpoint's batch_id); never stored.
    if (checked.detail)
      log('info', 'webhook URL refused before delivery', { webhookId: attempt.id, why: checked.detail });
    // A name that could not be resolved just now is a network failure; anything else is refused.
    return { outcome: checked.transient ? 'network_error' : 'refused_address', reason: checked.reason };
  }
  const timestamp = Math.floor(Date.now() / 1000);
  let status: number;
  try {
    status = await pinnedPost({
      url: checked.url,
      addresses: checked.addresses,
      body: attempt.body,
      timeoutMs: opts.timeoutMs,
      bodyCap: BODY_CAP,
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
  if (status >= 200 && status < 300) return { outcome: 'success' };
  if (status >= 300 && status < 400) return { outcome: 'redirect', reason: `redirect not followed (HTTP ${status})` };
  return { outcome: 'http_error', reason: `HTTP ${status}` };
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

const seconds = (ms: number) => (ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`);

function short(e: unknown): string {
  const text = e instanceof Error ? e.message : String(e);
  return text.split('\n')[0]!.slice(0, 200);
}
