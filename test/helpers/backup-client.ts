/**
 * What the backup test asks of the running API, over real HTTP: JSON calls with a key, the upload
 * link's PUT, and the events feed read from a cursor to its end.
 */
export interface Answer {
  status: number;
  body: any;
}

/** One call of the API at `base` with `key`; the body parsed when it is JSON. */
export async function call(base: string, key: string, method: string, path: string, json?: unknown): Promise<Answer> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(json !== undefined && { 'content-type': 'application/json' }) },
    ...(json !== undefined && { body: JSON.stringify(json) }),
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    // not JSON: kept as text
  }
  return { status: res.status, body };
}

/** PUTs a file to an upload link; `base` replaces the link's origin (a restored service has its own). */
export async function upload(uploadUrl: string, csv: string, base?: string): Promise<number> {
  const url = base ? `${base}${new URL(uploadUrl).pathname}` : uploadUrl;
  const res = await fetch(url, { method: 'PUT', body: csv });
  await res.arrayBuffer();
  return res.status;
}

export interface FeedEvent {
  id: string;
  type: string;
  occurredAt: string;
  data: { email: string; emailMd5: string; brandId: string; source: { type: string; importId?: string } };
}

/** Every event after `after` (from the start without it), page by page, and the `next` of the empty page. */
export async function feedFrom(
  base: string,
  key: string,
  after?: string,
  limit = 1000,
): Promise<{ events: FeedEvent[]; next: string }> {
  const events: FeedEvent[] = [];
  let cursor = after;
  for (;;) {
    const query = `limit=${limit}${cursor ? `&after=${encodeURIComponent(cursor)}` : ''}`;
    const page = await call(base, key, 'GET', `/v1/events?${query}`);
    if (page.status !== 200) throw new Error(`GET /v1/events: ${page.status} ${JSON.stringify(page.body)}`);
    events.push(...(page.body.data as FeedEvent[]));
    cursor = page.body.next as string;
    if (page.body.data.length === 0) return { events, next: cursor };
  }
}

/** The event's number in `evt_<n>_<md5>`: the id its set drew from the events' identity sequence. */
export const setNumber = (e: FeedEvent) => Number(/^evt_(\d+)_/.exec(e.id)?.[1]);

/** Polls until `check` gives a value, or throws after `ms` naming `what`. */
export async function eventually<T>(what: string, check: () => Promise<T | undefined>, ms = 45_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const got = await check().catch(() => undefined);
    if (got !== undefined) return got;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await Bun.sleep(100);
  }
}
