// worker/events/pinned-post.ts: a webhook POST goes to the addresses given and to no other, while the
// URL's name is what Host, TLS SNI and certificate verification see (issue 60, item 1). Every server
// here listens on 127.0.0.1 and is reached through a name that resolves nowhere.
import { afterEach, describe, expect, test } from 'bun:test';
import { createServer as createHttpsServer } from 'node:https';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { pinnedPost, PostTimeout, type PinnedPost } from '../../worker/events/pinned-post';

// A self-signed certificate for hooks.test and its key, made for this test only (P-256, 100 years).
const KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg2vrYDgzFyEq0+J2m
LQUTsFzA9mVJOVkyCULRboJrO/WhRANCAAQjL3Wq3ankO2nNPYYZdYKVlyUSU3qd
pZvNj+X9PhdAlkm1VZ94/wca84JMCOrUiZ/HeDnbj2QC9dR8yJJ5MKW4
-----END PRIVATE KEY-----`;
const CERT = `-----BEGIN CERTIFICATE-----
MIIBmTCCAT6gAwIBAgIUcpNABTTwmc3iwc2IQfp4Yjf0Vr8wCgYIKoZIzj0EAwIw
FTETMBEGA1UEAwwKaG9va3MudGVzdDAgFw0yNjEyMDYwNTA2MjhaGA8yMTI2MTEx
MjA1MDYyOFowFTETMBEGA1UEAwwKaG9va3MudGVzdDBZMBMGByqGSM49AgEGCCqG
SM49AwEHA0IABCMvdardqeQ7ac09hhl1gpWXJRJTep2lm82P5f0+F0CWSbVVn3j/
BxrzgkwI6tSJn8d4OduPZAL11HzIknkwpbijajBoMB0GA1UdDgQWBBSlyq+OSLtU
7gqxxgJdx7Dihy1pJzAfBgNVHSMEGDAWgBSlyq+OSLtU7gqxxgJdx7Dihy1pJzAP
BgNVHRMBAf8EBTADAQH/MBUGA1UdEQQOMAyCCmhvb2tzLnRlc3QwCgYIKoZIzj0E
AwIDSQAwRgIhAMYThObyL1RdAq5EJHJgdlmV5yaleZ50Gmb1+NrJAcVkAiEAle9U
AaimuI8CxmZVLWh8njy2dPFeGchrGkYuDn3RlyY=
-----END CERTIFICATE-----`;

const stops: (() => unknown)[] = [];
afterEach(async () => {
  for (const stop of stops.splice(0)) await stop();
});

const post = (url: string, more: Partial<PinnedPost> = {}) =>
  pinnedPost({
    url: new URL(url),
    addresses: ['127.0.0.1'],
    headers: {},
    body: '{"a":1}',
    timeoutMs: 2_000,
    bodyCap: 4_096,
    ...more,
  });

function serve(answer: (req: Request) => Response | Promise<Response>) {
  const seen: { host: string | null; path: string; body: string }[] = [];
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    async fetch(req) {
      seen.push({ host: req.headers.get('host'), path: new URL(req.url).pathname, body: await req.text() });
      return answer(req);
    },
  });
  stops.push(() => server.stop(true));
  return { port: server.port!, seen };
}

async function listen(server: Server): Promise<number> {
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  stops.push(() => new Promise((done) => server.close(done)));
  return (server.address() as AddressInfo).port;
}

describe('pinnedPost', () => {
  test("http: the connection goes to the address given; Host is the URL's name and port", async () => {
    const r = serve(() => new Response('ok', { status: 202 }));
    expect(await post(`http://hooks.invalid:${r.port}/in?x=1`)).toBe(202);
    expect(r.seen).toEqual([{ host: `hooks.invalid:${r.port}`, path: '/in', body: '{"a":1}' }]);
  });

  test("https: TLS goes to the address given with the URL's name as SNI", async () => {
    const hellos: Buffer[] = [];
    const server = createServer((socket: Socket) => {
      socket.once('data', (hello: Buffer) => {
        hellos.push(hello);
        socket.destroy();
      });
    });
    const port = await listen(server);
    // The server hangs up after the hello: no answer, an error.
    expect(
      await post(`https://hooks.test:${port}/`).then(
        () => 'answered',
        () => 'failed',
      ),
    ).toBe('failed');
    expect(hellos).toHaveLength(1);
    // A TLS ClientHello (record type 22) whose server_name extension carries the name, in clear.
    expect(hellos[0]![0]).toBe(22);
    expect(hellos[0]!.includes('hooks.test')).toBe(true);
  });

  test('https: the certificate is verified (a self-signed one is refused)', async () => {
    let answered = 0;
    const server = createHttpsServer({ key: KEY, cert: CERT }, (_req, res) => {
      answered++;
      res.end('ok');
    });
    const port = await listen(server);
    const error = await post(`https://hooks.test:${port}/`).then(
      () => undefined,
      (e: { code?: string }) => e,
    );
    expect(error?.code).toBe('DEPTH_ZERO_SELF_SIGNED_CERT');
    expect(answered).toBe(0);
  });

  test('a redirect is an answer, not followed', async () => {
    const r = serve(() => new Response(null, { status: 302, headers: { location: '/elsewhere' } }));
    expect(await post(`http://hooks.invalid:${r.port}/`)).toBe(302);
    expect(r.seen.map((s) => s.path)).toEqual(['/']);
  });

  test('an endless answer: the status once bodyCap bytes came; no answer: a PostTimeout', async () => {
    const endless = serve(
      () => new Response(new ReadableStream({ pull: (c) => c.enqueue(new Uint8Array(1024)) }), { status: 500 }),
    );
    expect(await post(`http://hooks.invalid:${endless.port}/`)).toBe(500);
    const silent = serve(() => new Promise<Response>(() => {}));
    const started = performance.now();
    const error = await post(`http://hooks.invalid:${silent.port}/`, { timeoutMs: 200 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(PostTimeout);
    expect(performance.now() - started).toBeLessThan(1_000);
  });
});
