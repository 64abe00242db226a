import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIPv6, type LookupFunction } from 'node:net';

export interface PinnedPost {
  /** An http(s) URL: its host names the `Host` header, and for https the TLS server name and certificate. */
  url: URL;
  /** Where the connection may go: addresses already checked for this attempt. Never empty. */
  addresses: string[];
  headers: Record<string, string>;
  body: string;
  /** The whole exchange, the answer's body included, ends within this. */
  timeoutMs: number;
  /** What of the answer's body is read at most; the rest is dropped unread. */
  bodyCap: number;
}

/** An attempt that took longer than its `timeoutMs`: worker/events/send.ts tells it by its name. */
export class PostTimeout extends Error {
  override readonly name = 'TimeoutError';
}

/**
 * POSTs `body` to `url` over a connection to one of `addresses` and to no other: the socket's lookup
 * answers with them instead of asking DNS again, so a name that answered a public address to the
 * check cannot send the connection to an internal one (DNS rebinding). The URL's name is still what
 * `Host`, TLS SNI and certificate verification use. `fetch` cannot be given the address to connect to
 * without losing the two last; node:http(s) can, and Bun honours their `lookup`.
 *
 * No agent: a kept-alive socket would carry a later attempt to the address an earlier one checked.
 * Redirects are never followed (node:http does not). Resolves with the answer's status once its body
 * ended or `bodyCap` bytes of it came; rejects with the socket's error or a PostTimeout.
 */
export function pinnedPost(post: PinnedPost): Promise<number> {
  const { url, addresses } = post;
  const pinned = addresses.map((address) => ({ address, family: isIPv6(address) ? 6 : 4 }));
  const lookup: LookupFunction = (_host, options, callback) => {
    if (options.all) callback(null, pinned);
    else callback(null, pinned[0]!.address, pinned[0]!.family);
  };
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise<number>((resolve, reject) => {
    let status: number | undefined;
    const done = (error?: Error) => {
      clearTimeout(timer);
      req.destroy();
      if (status !== undefined) resolve(status);
      else reject(error ?? new Error('the connection closed before an answer'));
    };
    const req = send(
      {
        // An IPv6 literal comes bracketed from WHATWG URL; the socket wants it bare (and then asks no lookup).
        host: url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname,
        port: url.port === '' ? undefined : Number(url.port),
        path: url.pathname + url.search,
        method: 'POST',
        headers: { ...post.headers, host: url.host, 'content-length': String(Buffer.byteLength(post.body)) },
        lookup,
        agent: false,
      },
      (res: IncomingMessage) => {
        status = res.statusCode ?? 0;
        // A hostile receiver may answer with an endless body: a few KB are read, the rest is dropped.
        let read = 0;
        res.on('data', (chunk: Buffer) => {
          read += chunk.byteLength;
          if (read > post.bodyCap) done();
        });
        res.on('end', () => done());
        // A body cut or timed out after the status came: the status is the answer.
        res.on('error', () => done());
        res.on('close', () => done());
      },
    );
    const timer = setTimeout(() => done(new PostTimeout(`no answer within ${post.timeoutMs} ms`)), post.timeoutMs);
    req.on('error', (e) => done(e));
    req.end(post.body);
  });
}
