/**
 * Every request the soak sends goes through here and leaves one record: when, what, what came back
 * (or that nothing did), and whether the answer kept the contract's error rules. A refused or reset
 * connection while the API is being restarted is "no answer", not a status: the caller retries later.
 */
export interface Sent {
  account: number;
  method: string;
  /** The route, ids replaced, for the report. */
  route: string;
  /** ms since the soak's start */
  start: number;
  end: number;
  status?: number;
  contentType?: string | null;
  retryAfter?: string | null;
  /** Why nothing came back. */
  noAnswer?: string;
  /** A broken rule of the contract's errors, if any. */
  bad?: string;
}

export interface Answer<T = unknown> {
  status?: number;
  body?: T;
  retryAfter?: number;
  sent: Sent;
}

export interface Recorder {
  t0: number;
  /** Set to end every loop that sends through this recorder early (Ctrl-C of the script). */
  halted: boolean;
  sent: Sent[];
  call<T = Record<string, unknown>>(
    account: number,
    method: string,
    url: string,
    opts?: { key?: string; json?: unknown; raw?: string; route?: string },
  ): Promise<Answer<T>>;
}

/** Long enough that a request the API still works on is not given up (a given-up write would land unseen). */
const REQUEST_TIMEOUT_MS = 60_000;

export function recorder(t0: number): Recorder {
  const sent: Sent[] = [];
  return {
    t0,
    halted: false,
    sent,
    async call(account, method, url, opts = {}) {
      const route = opts.route ?? new URL(url).pathname.replace(/[0-9a-f-]{32,36}/gi, '{id}');
      const s: Sent = { account, method, route, start: Date.now() - t0, end: 0 };
      sent.push(s);
      const isUpload = route.startsWith('/uploads/');
      try {
        const res = await fetch(url, {
          method,
          headers: {
            ...(opts.key && { authorization: `Bearer ${opts.key}` }),
            ...(opts.json !== undefined && { 'content-type': 'application/json' }),
          },
          ...(opts.json !== undefined && { body: JSON.stringify(opts.json) }),
          ...(opts.raw !== undefined && { body: opts.raw }),
          signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        });
        const text = await res.text();
        s.end = Date.now() - t0;
        s.status = res.status;
        s.contentType = res.headers.get('content-type');
        s.retryAfter = res.headers.get('retry-after');
        let body: unknown;
        try {
          body = text ? JSON.parse(text) : undefined;
        } catch {
          body = text;
        }
        // The upload link answers as S3 does (XML), which the contract allows; every /v1 error is problem+json.
        if (res.status >= 400 && !isUpload && s.contentType !== 'application/problem+json')
          s.bad = `${res.status} as ${s.contentType}: ${text.slice(0, 120)}`;
        else if (res.status >= 400 && !isUpload && (body as { status?: number })?.status !== res.status)
          s.bad = `${res.status} with a problem body saying ${text.slice(0, 120)}`;
        else if (res.status === 409 && !isUpload && !contactExists(body) && !(Number(s.retryAfter) >= 1))
          s.bad = `409 ${(body as { code?: string })?.code} without Retry-After`;
        const retryAfter = s.retryAfter ? Number(s.retryAfter) : undefined;
        return { status: res.status, body: body as never, retryAfter, sent: s };
      } catch (e) {
        s.end = Date.now() - t0;
        s.noAnswer = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
        return { sent: s };
      }
    },
  };
}

/** The one 409 that says "no" rather than "later": no Retry-After is due. */
const contactExists = (body: unknown) => (body as { code?: string } | undefined)?.code === 'contact_exists';

export const is2xx = (a: { status?: number }) => a.status !== undefined && a.status >= 200 && a.status < 300;
