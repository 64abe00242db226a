/**
 * A fault proxy for the object store: a TCP server on loopback in front of an S3-protocol server
 * (s3rver, MinIO) that forwards each request, or instead answers it with a fault. Point the store's
 * S3_ENDPOINT at `url`; SigV4 signs the Host header, which passes through unchanged, so the server
 * behind takes requests and presigned URLs made for the proxy.
 *
 * Each client connection carries one request (the head is rewritten to `Connection: close`), so
 * every request meets the fault plan on its own, even from a client that keeps connections alive.
 *
 * @example
 * const proxy = await startS3FaultProxy(s3.endpoint);
 * proxy.set({ fault: 'truncate', next: 2, match: (r) => r.method === 'GET' });
 * … run the code under test against proxy.url …
 * proxy.set(undefined); // every request passes again
 * await proxy.stop();
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * `error500`: 500 InternalError; `slowDown`: 503 SlowDown (S3's throttling answer); `reset`: the
 * connection dropped without an answer; `stall`: no answer at all, the connection held open until
 * the client gives up (or the proxy stops); `truncate`: the server's answer forwarded with its full
 * Content-Length but only half its body, then the connection closed; `stallBody`: the same half,
 * then nothing more on a connection held open (a stall mid-body, which request timeouts miss).
 */
export type S3Fault = 'error500' | 'slowDown' | 'reset' | 'stall' | 'truncate' | 'stallBody';

export interface S3Request {
  method: string;
  /** The path with its query string, as sent. */
  target: string;
  headers: Record<string, string>;
}

export interface FaultPlan {
  fault: S3Fault;
  /** Fault the next `next` matching requests, then let every one pass. */
  next?: number;
  /** Or fault each matching request with this probability (0…1), drawn from the proxy's seeded PRNG. */
  rate?: number;
  /** Which requests the plan applies to (all when absent). */
  match?: (req: S3Request) => boolean;
}

export interface ProxiedRequest extends S3Request {
  /** The fault injected instead of (or into) the answer, if any. */
  fault?: S3Fault;
}

export interface S3FaultProxy {
  /** `http://127.0.0.1:<port>`: the endpoint to give the store. */
  url: string;
  port: number;
  /** Replaces the fault plan; `undefined` lets every request through. */
  set(plan: FaultPlan | undefined): void;
  /** Every request seen, in arrival order. */
  readonly requests: readonly ProxiedRequest[];
  /** How many faults were injected since start. */
  readonly injected: number;
  stop(): Promise<void>;
}

const HEAD_END = Buffer.from('\r\n\r\n');
/** A request head larger than this is not S3 traffic; the connection is dropped. */
const MAX_HEAD = 64 * 1024;

/** Starts the proxy on a free loopback port in front of `target` (`http://host:port`). */
export async function startS3FaultProxy(target: string, opts: { seed?: number } = {}): Promise<S3FaultProxy> {
  const upstream = new URL(target);
  const upstreamPort = Number(upstream.port || 80);
  let plan: FaultPlan | undefined;
  let left = 0;
  let injected = 0;
  const random = prng(opts.seed ?? 1);
  const requests: ProxiedRequest[] = [];
  const open = new Set<Socket>();

  const decide = (req: S3Request): S3Fault | undefined => {
    if (!plan || (plan.match && !plan.match(req))) return undefined;
    if (plan.next !== undefined) {
      if (left <= 0) return undefined;
      left--;
      return plan.fault;
    }
    return random() < (plan.rate ?? 0) ? plan.fault : undefined;
  };

  const server: Server = createServer((client) => {
    open.add(client);
    client.on('close', () => open.delete(client));
    client.on('error', () => {});
    let buffered = Buffer.alloc(0);
    const onData = (data: Buffer) => {
      buffered = Buffer.concat([buffered, data]);
      const end = buffered.indexOf(HEAD_END);
      if (end < 0) {
        if (buffered.length > MAX_HEAD) client.destroy();
        return;
      }
      client.off('data', onData);
      const head = parseHead(buffered.subarray(0, end).toString('latin1'));
      const rest = buffered.subarray(end + HEAD_END.length);
      const fault = decide(head);
      if (fault) injected++;
      requests.push({ ...head, ...(fault && { fault }) });
      if (fault === 'truncate' || fault === 'stallBody' || !fault)
        forward(client, head, rest, fault, upstream.hostname, upstreamPort, open);
      else answerWithFault(client, head, rest, fault);
    };
    client.on('data', onData);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;

  return {
    url: `http://127.0.0.1:${port}`,
    port,
    set(next) {
      plan = next;
      left = next?.next ?? 0;
    },
    get requests() {
      return requests;
    },
    get injected() {
      return injected;
    },
    async stop() {
      plan = undefined;
      for (const s of open) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function parseHead(text: string): S3Request {
  const [line = '', ...fields] = text.split('\r\n');
  const [method = '', target = ''] = line.split(' ');
  const headers: Record<string, string> = {};
  for (const f of fields) {
    const colon = f.indexOf(':');
    if (colon > 0) headers[f.slice(0, colon).trim().toLowerCase()] = f.slice(colon + 1).trim();
  }
  return { method, target, headers };
}

/** The head as the server behind gets it: one request per connection. */
function headFor(req: S3Request): Buffer {
  const lines = [`${req.method} ${req.target} HTTP/1.1`];
  for (const [k, v] of Object.entries(req.headers))
    if (k !== 'connection' && k !== 'keep-alive') lines.push(`${k}: ${v}`);
  lines.push('connection: close', '', '');
  return Buffer.from(lines.join('\r\n'), 'latin1');
}

const S3_ERRORS = {
  error500: {
    status: '500 Internal Server Error',
    code: 'InternalError',
    message: 'We encountered an internal error.',
  },
  slowDown: { status: '503 Slow Down', code: 'SlowDown', message: 'Please reduce your request rate.' },
} as const;

function answerWithFault(
  client: Socket,
  req: S3Request,
  rest: Buffer,
  fault: Exclude<S3Fault, 'truncate' | 'stallBody'>,
): void {
  if (fault === 'stall') return; // held open: the client's timeout is what is under test
  if (fault === 'reset') {
    const s = client as Socket & { resetAndDestroy?: () => void };
    if (s.resetAndDestroy) s.resetAndDestroy();
    else client.destroy();
    return;
  }
  const e = S3_ERRORS[fault];
  const body =
    req.method === 'HEAD'
      ? ''
      : `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${e.code}</Code><Message>${e.message}</Message></Error>`;
  const answer = () => {
    client.end(
      `HTTP/1.1 ${e.status}\r\ncontent-type: application/xml\r\ncontent-length: ${Buffer.byteLength(body)}\r\n` +
        `connection: close\r\n\r\n${body}`,
    );
  };
  // As a server would: the request's body is taken in before the answer, so the client is not cut
  // off mid-send (it would see a broken pipe, another fault). A client that waits for 100-continue
  // (the SDK, for bodies over 2 MB) sends none: the answer comes at once.
  let owed = /100-continue/i.test(req.headers.expect ?? '')
    ? 0
    : Number(req.headers['content-length'] ?? 0) - rest.length;
  if (owed <= 0) {
    answer();
    return;
  }
  client.on('data', (d: Buffer) => {
    owed -= d.length;
    if (owed <= 0) answer();
  });
}

function forward(
  client: Socket,
  req: S3Request,
  rest: Buffer,
  cut: 'truncate' | 'stallBody' | undefined,
  host: string,
  port: number,
  open: Set<Socket>,
): void {
  const server = connect(port, host);
  open.add(server);
  server.on('close', () => open.delete(server));
  server.on('error', () => client.destroy());
  client.on('close', () => server.destroy());
  server.write(headFor(req));
  if (rest.length) server.write(rest);
  client.pipe(server);
  if (!cut) {
    server.pipe(client);
    return;
  }
  // Half the answer's body (at least one byte short of it), its head promising the whole.
  let seen = Buffer.alloc(0);
  let allowed: number | undefined;
  server.on('data', (d: Buffer) => {
    if (allowed === undefined) {
      seen = Buffer.concat([seen, d]);
      const end = seen.indexOf(HEAD_END);
      if (end < 0) return;
      const head = seen.subarray(0, end + HEAD_END.length);
      const length = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head.toString('latin1'))?.[1] ?? 0);
      allowed = head.length + Math.max(0, Math.min(Math.floor(length / 2), length - 1));
      d = seen;
    }
    const n = Math.min(d.length, allowed);
    if (n > 0) client.write(d.subarray(0, n));
    allowed -= n;
    if (allowed > 0) return;
    server.destroy();
    // stallBody: the client's socket stays open and silent until the client (or stop()) drops it.
    if (cut === 'truncate') client.end();
  });
}

/** mulberry32: a seeded PRNG, so a rate plan faults the same requests run after run. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
