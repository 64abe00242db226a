// Which webhook URLs may be called (src/webhooks/url-safety.ts): at creation, and again by the relay
// before every delivery. No database: IP literals need no DNS, and names go through an injected
// resolver but for `localhost` and `.invalid`, which need no network either.
import { describe, expect, test } from 'bun:test';
import fc from 'fast-check';
import { checkWebhookUrl, parseWebhookUrl, refusedAddress, URL_NOT_ALLOWED } from '../../src/webhooks/url-safety';

/** Why a URL is refused as logs say it (`detail`), or 'ok'; a refusal with no detail gives its reason. */
const reasonOf = async (url: string, allowPrivate = false, resolve?: (h: string) => Promise<string[]>) => {
  const r = await checkWebhookUrl(url, allowPrivate, resolve ? { resolve } : {});
  return r.ok ? 'ok' : (r.detail ?? r.reason);
};
/** What the client is told (the API's error, the endpoint's last failure). */
const toldOf = async (url: string, allowPrivate = false, resolve?: (h: string) => Promise<string[]>) => {
  const r = await checkWebhookUrl(url, allowPrivate, resolve ? { resolve } : {});
  return r.ok ? 'ok' : r.reason;
};
const failing = (code: string) => () => Promise.reject(Object.assign(new Error(code), { code }));
const unused = () => Promise.reject(new Error('the resolver must not be called for an IP literal'));

describe('parseWebhookUrl: syntax', () => {
  test('absolute http and https URLs pass, normalised by WHATWG URL', () => {
    const cases: [string, string][] = [
      ['https://hooks.example.com/in?x=1', 'https://hooks.example.com/in?x=1'],
      ['HTTP://Example.COM', 'http://example.com/'],
      ['https://example.com:8443/a b', 'https://example.com:8443/a%20b'],
      ['  https://example.com/  ', 'https://example.com/'],
      ['https://bücher.example/', 'https://xn--bcher-kva.example/'],
    ];
    for (const [text, href] of cases) {
      const r = parseWebhookUrl(text);
      expect({ text, href: r.ok ? r.url.href : r.reason }).toEqual({ text, href });
    }
  });

  test('anything that is not an absolute URL is refused', () => {
    for (const text of [
      '',
      'example.com',
      '/hook',
      '//example.com/hook',
      'http://',
      'https://a b.com/',
      'http://[::1/',
    ]) {
      expect({ text, r: parseWebhookUrl(text) }).toEqual({
        text,
        r: { ok: false, reason: 'The URL is not a valid absolute URL.' },
      });
    }
  });

  test('a scheme other than http or https is refused, naming it', () => {
    for (const [text, scheme] of [
      ['ftp://example.com/', 'ftp'],
      ['ws://example.com/', 'ws'],
      ['wss://example.com/', 'wss'],
      ['file:///etc/passwd', 'file'],
      ['javascript:alert(1)', 'javascript'],
      ['data:text/plain,hi', 'data'],
      ['mailto:a@example.com', 'mailto'],
      ['gopher://example.com/', 'gopher'],
    ]) {
      const r = parseWebhookUrl(text!);
      expect(r.ok ? 'ok' : r.reason).toBe(`The URL's scheme must be http or https, not ${scheme}.`);
    }
  });

  test('credentials in the URL are refused, a user or a password alone too', () => {
    for (const text of ['https://user:pw@example.com/', 'https://user@example.com/', 'https://:pw@example.com/']) {
      const r = parseWebhookUrl(text);
      expect(r.ok ? 'ok' : r.reason).toBe('The URL must not contain credentials (user:password@).');
    }
  });

  test('port 0 is refused; any other port is fine', () => {
    expect(parseWebhookUrl('https://example.com:0/').ok).toBe(false);
    expect(parseWebhookUrl('https://example.com:1/').ok).toBe(true);
    expect(parseWebhookUrl('https://example.com:65535/').ok).toBe(true);
    expect(parseWebhookUrl('https://example.com:65536/').ok).toBe(false);
  });
});

describe('checkWebhookUrl: IP literals, without DNS', () => {
  const refused: [string, string][] = [
    ['http://127.0.0.1/', 'loopback'],
    ['http://127.255.255.254:8080/', 'loopback'],
    // The spellings WHATWG URL reads as IPv4: each becomes 127.0.0.1 before the check.
    ['http://2130706433/', 'loopback'],
    ['http://0x7f000001/', 'loopback'],
    ['http://0x7f.1/', 'loopback'],
    ['http://0177.0.0.1/', 'loopback'],
    ['http://017700000001/', 'loopback'],
    ['http://127.1/', 'loopback'],
    ['http://%31%32%37.0.0.1/', 'loopback'],
    ['http://[::1]/', 'loopback'],
    ['http://[0:0:0:0:0:0:0:1]/', 'loopback'],
    ['http://[::ffff:127.0.0.1]/', 'loopback'],
    ['http://[::ffff:7f00:1]/', 'loopback'],
    ['http://[0:0:0:0:0:ffff:127.0.0.1]/', 'loopback'],
    ['http://[64:ff9b::7f00:1]/', 'loopback'],
    ['http://[2002:7f00:1::1]/', 'loopback'],
    ['http://0.0.0.0/', 'unspecified'],
    ['http://0/', 'unspecified'],
    ['http://[::]/', 'unspecified'],
    ['http://[::ffff:0.0.0.0]/', 'unspecified'],
    ['http://0.1.2.3/', 'reserved ("this network")'],
    ['http://10.0.0.1/', 'private'],
    ['http://10.255.255.255/', 'private'],
    ['http://172.16.0.1/', 'private'],
    ['http://172.31.255.255/', 'private'],
    ['http://192.168.1.1/', 'private'],
    ['http://3232235777/', 'private'],
    ['http://[::ffff:192.168.0.1]/', 'private'],
    ['http://[::ffff:a00:1]/', 'private'],
    ['http://[64:ff9b::10.1.2.3]/', 'private'],
    ['http://[fc00::1]/', 'private (unique local)'],
    ['http://[fdff:ffff::1]/', 'private (unique local)'],
    ['http://169.254.169.254/latest/meta-data/', 'link-local'],
    ['http://[::ffff:169.254.169.254]/', 'link-local'],
    ['http://[fe80::1]/', 'link-local'],
    ['http://[febf::1]/', 'link-local'],
    ['http://[fec0::1]/', 'site-local'],
    ['http://100.64.0.1/', 'shared (CGNAT)'],
    ['http://100.127.255.255/', 'shared (CGNAT)'],
    ['http://224.0.0.1/', 'multicast'],
    ['http://239.255.255.250/', 'multicast'],
    ['http://[ff02::1]/', 'multicast'],
    ['http://[::ffff:224.0.0.1]/', 'multicast'],
    ['http://255.255.255.255/', 'broadcast'],
    ['http://240.0.0.1/', 'reserved'],
    ['http://192.0.0.8/', 'reserved (IETF protocol assignments)'],
    ['http://192.0.2.10/', 'documentation'],
    ['http://198.51.100.10/', 'documentation'],
    ['http://203.0.113.10/', 'documentation'],
    ['http://[2001:db8::1]/', 'documentation'],
    ['http://198.18.0.1/', 'benchmarking'],
    ['http://198.19.255.255/', 'benchmarking'],
    // IPv4-compatible (deprecated), discard-only, Teredo's block, local-use NAT64: not global.
    ['http://[::127.0.0.1]/', 'reserved'],
    ['http://[::8.8.8.8]/', 'reserved'],
    ['http://[100::1]/', 'reserved'],
    ['http://[64:ff9b:1::1]/', 'reserved'],
    ['http://[2001::1]/', 'reserved (IETF protocol assignments)'],
  ];

  test('a non-public address is refused, its kind in the detail for logs, however it is spelled', async () => {
    for (const [url, kind] of refused) {
      const reason = await reasonOf(url, false, unused);
      expect({ url, reason }).toEqual({
        url,
        reason: expect.stringMatching(new RegExp(`is an? ${kind.replace(/[()]/g, '\\$&')} address\\.$`)),
      });
      // The client is told the same for every one of them.
      expect({ url, told: await toldOf(url, false, unused) }).toEqual({ url, told: URL_NOT_ALLOWED });
    }
  });

  test('the detail names the host as normalised', async () => {
    expect(await reasonOf('http://0x7f.1/', false, unused)).toBe("The URL's host 127.0.0.1 is a loopback address.");
    expect(await reasonOf('http://[0::1]/', false, unused)).toBe("The URL's host [::1] is a loopback address.");
  });

  test('public addresses pass, right next to the refused ranges too', async () => {
    for (const url of [
      'http://1.1.1.1/',
      'https://8.8.8.8:8443/hook',
      'http://9.255.255.255/',
      'http://11.0.0.0/',
      'http://100.63.255.255/',
      'http://100.128.0.0/',
      'http://126.255.255.255/',
      'http://128.0.0.0/',
      'http://169.253.255.255/',
      'http://169.255.0.0/',
      'http://172.15.255.255/',
      'http://172.32.0.0/',
      'http://192.0.0.9/',
      'http://192.0.0.10/',
      'http://192.0.1.1/',
      'http://192.167.255.255/',
      'http://192.169.0.0/',
      'http://198.17.255.255/',
      'http://198.20.0.0/',
      'http://223.255.255.255/',
      'http://134744072/',
      'http://[2606:4700:4700::1111]/',
      'http://[2001:4860:4860::8888]/',
      'http://[::ffff:8.8.8.8]/',
      'http://[64:ff9b::808:808]/',
      'http://[2002:808:808::1]/',
      'http://[2001:3::1]/',
      'http://[2001:20::1]/',
      'http://[2620:4f:8000::1]/',
    ]) {
      expect({ url, reason: await reasonOf(url, false, unused) }).toEqual({ url, reason: 'ok' });
    }
  });

  test('with private addresses allowed, every one of them passes', async () => {
    for (const [url] of refused)
      expect({ url, reason: await reasonOf(url, true, unused) }).toEqual({ url, reason: 'ok' });
  });

  test('the checked URL and its address come back', async () => {
    const r = await checkWebhookUrl('http://[::ffff:8.8.8.8]:81/x', false, { resolve: unused });
    expect(r).toEqual({ ok: true, url: new URL('http://[::ffff:808:808]:81/x'), addresses: ['::ffff:808:808'] });
  });
});

describe('checkWebhookUrl: names, through DNS', () => {
  test('a name is judged by every address it resolves to, none of which the detail names', async () => {
    const resolve = (answers: string[]) => async () => answers;
    expect(
      await checkWebhookUrl('https://hooks.example.com/in', false, { resolve: resolve(['93.184.215.14']) }),
    ).toEqual({ ok: true, url: new URL('https://hooks.example.com/in'), addresses: ['93.184.215.14'] });
    const reason = await reasonOf('https://hooks.example.com/in', false, resolve(['10.1.2.3']));
    expect(reason).toBe("The URL's host hooks.example.com resolves to a private address.");
    expect(reason).not.toContain('10.1.2.3');
    expect(await toldOf('https://hooks.example.com/in', false, resolve(['10.1.2.3']))).toBe(URL_NOT_ALLOWED);
    // One refused address among public ones: the HTTP client might pick it.
    expect(await reasonOf('https://a.example/', false, resolve(['93.184.215.14', '::1']))).toContain('loopback');
    expect(await reasonOf('https://a.example/', false, resolve(['2606:4700::1', '::ffff:192.168.0.1']))).toContain(
      'private',
    );
    expect(await reasonOf('https://a.example/', false, resolve(['fe80::1%eth0']))).toContain('link-local');
    expect(await reasonOf('https://a.example/', true, resolve(['10.1.2.3', '::1']))).toBe('ok');
  });

  test('the name is resolved as WHATWG URL normalised it', async () => {
    const asked: string[] = [];
    const resolve = async (host: string) => {
      asked.push(host);
      return ['93.184.215.14'];
    };
    await checkWebhookUrl('https://HOOKS.Example.COM./x', false, { resolve });
    await checkWebhookUrl('https://bücher.example/', false, { resolve });
    expect(asked).toEqual(['hooks.example.com.', 'xn--bcher-kva.example']);
  });

  test('a name that does not resolve is refused, private addresses allowed or not', async () => {
    for (const allow of [false, true]) {
      for (const resolve of [failing('ENOTFOUND'), failing('ENODATA'), async () => []]) {
        const r = await checkWebhookUrl('https://nowhere.example/', allow, { resolve });
        expect(r).toEqual({
          ok: false,
          reason: URL_NOT_ALLOWED,
          detail: "The URL's host nowhere.example does not resolve to any address.",
        });
      }
    }
  });

  test('the client is told the same whether a name is internal, missing or failing to resolve', async () => {
    const told = new Set<string>();
    for (const resolve of [
      async () => ['10.1.2.3'],
      async () => ['127.0.0.1'],
      async () => [],
      failing('ENOTFOUND'),
      failing('ESERVFAIL'),
    ])
      told.add(await toldOf('https://internal.example/', false, resolve));
    told.add(await toldOf('http://[::1]:6379/', false, unused));
    expect([...told]).toEqual([URL_NOT_ALLOWED]);
  });

  test('a resolver failure or timeout is refused too, marked transient (the relay retries later)', async () => {
    expect(await checkWebhookUrl('https://a.example/', true, { resolve: failing('ESERVFAIL') })).toEqual({
      ok: false,
      reason: URL_NOT_ALLOWED,
      detail: "The URL's host a.example could not be resolved (ESERVFAIL).",
      transient: true,
    });
    const started = performance.now();
    const slow = () => new Promise<string[]>((done) => setTimeout(() => done(['93.184.215.14']), 2_000));
    expect(await checkWebhookUrl('https://a.example/', false, { resolve: slow, timeoutMs: 50 })).toEqual({
      ok: false,
      reason: URL_NOT_ALLOWED,
      detail: "The URL's host a.example did not resolve within 50 ms.",
      transient: true,
    });
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  test('the default resolver: localhost is loopback, a .invalid name does not resolve', async () => {
    expect(await reasonOf('http://localhost:3000/hook')).toBe(
      "The URL's host localhost resolves to a loopback address.",
    );
    const local = await checkWebhookUrl('http://localhost:3000/hook', true);
    expect(local.ok && local.addresses.every((a) => refusedAddress(a) === 'loopback')).toBe(true);
    expect(await reasonOf('https://no-such-host.invalid/', true)).toBe(
      "The URL's host no-such-host.invalid does not resolve to any address.",
    );
  });
});

/** An independent reading of the IPv4 rules, octet by octet. */
function v4Refused(a: number, b: number, c: number, d: number): boolean {
  if (a === 192 && b === 0 && c === 0) return d !== 9 && d !== 10;
  return (
    a === 0 ||
    a === 10 ||
    a === 127 ||
    a >= 224 ||
    (a === 100 && b >= 64 && b <= 127) ||
    (a === 169 && b === 254) ||
    (a === 172 && b >= 16 && b <= 31) ||
    (a === 192 && b === 168) ||
    (a === 192 && b === 0 && c === 2) ||
    (a === 198 && (b === 18 || b === 19)) ||
    (a === 198 && b === 51 && c === 100) ||
    (a === 203 && b === 0 && c === 113)
  );
}

describe('refusedAddress: properties', () => {
  const octet = fc.integer({ min: 0, max: 255 });
  const quad = fc.tuple(octet, octet, octet, octet);
  // Biased toward the interesting first octets, so the ranges' edges are hit often.
  const edgy = fc.tuple(
    fc.constantFrom(0, 10, 100, 127, 169, 172, 192, 198, 203, 223, 224, 240, 255),
    octet,
    octet,
    octet,
  );

  test('an IPv4 address is refused exactly when the octet-by-octet rules say so', () => {
    fc.assert(
      fc.property(fc.oneof(quad, edgy), ([a, b, c, d]) => {
        expect(refusedAddress(`${a}.${b}.${c}.${d}`) !== undefined).toBe(v4Refused(a, b, c, d));
      }),
      { numRuns: 5000 },
    );
  });

  test("an IPv4 address's mapped, NAT64 and 6to4 forms are judged as the address itself", () => {
    fc.assert(
      fc.property(fc.oneof(quad, edgy), ([a, b, c, d]) => {
        const dotted = `${a}.${b}.${c}.${d}`;
        const hex = (x: number, y: number) => ((x << 8) | y).toString(16);
        const kind = refusedAddress(dotted);
        for (const form of [
          `::ffff:${dotted}`,
          `::ffff:${hex(a, b)}:${hex(c, d)}`,
          `64:ff9b::${dotted}`,
          `2002:${hex(a, b)}:${hex(c, d)}::1`,
        ])
          expect({ form, kind: refusedAddress(form) }).toEqual({ form, kind });
      }),
    );
  });

  test('every spelling WHATWG URL reads as an IPv4 address gets the same answer as its dotted form', async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(quad, edgy), async ([a, b, c, d]) => {
        const n = ((a << 24) | (b << 16) | (c << 8) | d) >>> 0;
        const want = await reasonOf(`http://${a}.${b}.${c}.${d}/`, false, unused);
        for (const host of [String(n), `0x${n.toString(16)}`, `0${n.toString(8)}`, `${a}.${(b << 16) | (c << 8) | d}`])
          expect({ host, reason: await reasonOf(`http://${host}/`, false, unused) }).toEqual({ host, reason: want });
      }),
    );
  });

  test('an IPv6 address gets the same answer however it is written (full, compressed, upper case)', () => {
    const group = fc.integer({ min: 0, max: 0xffff });
    // Prefixes of the special blocks, so that they come up often.
    const first = fc.oneof(group, fc.constantFrom(0, 0x64, 0x100, 0x2001, 0x2002, 0xfc00, 0xfe80, 0xfec0, 0xff02));
    fc.assert(
      fc.property(first, fc.array(fc.oneof(group, fc.constant(0)), { minLength: 7, maxLength: 7 }), (head, rest) => {
        const groups = [head, ...rest];
        const full = groups.map((g) => g.toString(16).padStart(4, '0')).join(':');
        const compressed = new URL(`http://[${full}]/`).hostname.slice(1, -1);
        const kind = refusedAddress(full);
        expect({ compressed, kind: refusedAddress(compressed) }).toEqual({ compressed, kind });
        expect(refusedAddress(full.toUpperCase())).toBe(kind);
        // Outside 2000::/3 nothing is public, but for the mapped and NAT64 forms of a public IPv4.
        if (head >>> 13 !== 1 && kind === undefined)
          expect(full.startsWith('0000:0000:0000:0000:0000:ffff') || full.startsWith('0064:ff9b:0000')).toBe(true);
      }),
      { numRuns: 5000 },
    );
  });

  test('text that is no IP address is "invalid"', () => {
    for (const text of ['', 'localhost', '1.2.3', '1.2.3.4.5', '256.0.0.1', '::g', '[::1]', '01.2.3.4']) {
      expect({ text, kind: refusedAddress(text) }).toEqual({ text, kind: 'invalid' });
    }
  });
});
