import { lookup } from 'node:dns/promises';
import { isIPv4, isIPv6 } from 'node:net';

/**
 * Whether a webhook URL may be called: when an endpoint is created, and again by the relay before
 * every delivery (DNS can change after creation). No HTTP concerns here; the caller turns a refusal
 * into its own error.
 *
 * Refused: anything but an absolute http(s) URL with a host, credentials in the URL, port 0, a host
 * that does not resolve, and, unless private addresses are allowed, a host that is or resolves to
 * an address that is not globally reachable (IANA's special-purpose registries: loopback, private,
 * link-local, unspecified, CGNAT, documentation, benchmarking, reserved, plus multicast and
 * broadcast), including the IPv4-mapped, NAT64 and 6to4 forms of such an address. One refused
 * address among several refuses the host: the HTTP client may connect to any of them.
 *
 * A check is only worth its `addresses`: the caller must connect to them and to nothing else
 * (worker/events/pinned-post.ts), since a name asked again may answer otherwise (DNS rebinding).
 *
 * A refusal that depends on what the host resolves to gives the one reason URL_NOT_ALLOWED, whatever
 * the cause: "does not resolve" and "resolves to a private address" would let a caller with a key
 * probe internal names through the API's answers and the endpoint's last failure. The cause is in
 * `detail`, for logs only.
 */
export type WebhookUrlCheck =
  { ok: true; url: URL; addresses: string[] } | { ok: false; reason: string; detail?: string; transient?: true };

/** The reason given to a client for every refusal that depends on DNS or on the address. */
export const URL_NOT_ALLOWED = 'The URL is not allowed: webhook URLs must reach a host on the public internet.';

export interface CheckOptions {
  /** The host's addresses; node:dns/promises lookup with `{all: true}` by default. */
  resolve?: (host: string) => Promise<string[]>;
  /** How long resolving may take before the host counts as not resolving (default 5000 ms). */
  timeoutMs?: number;
}

/** Syntax alone: an absolute http(s) URL with a host, no userinfo, not port 0. No DNS. */
export function parseWebhookUrl(text: string): { ok: true; url: URL } | { ok: false; reason: string } {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return { ok: false, reason: 'The URL is not a valid absolute URL.' };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return { ok: false, reason: `The URL's scheme must be http or https, not ${url.protocol.slice(0, -1)}.` };
  if (url.username !== '' || url.password !== '')
    return { ok: false, reason: 'The URL must not contain credentials (user:password@).' };
  // http(s) URLs always parse with a host; kept as a guard should that ever change.
  if (url.hostname === '') return { ok: false, reason: 'The URL has no host.' };
  if (url.port === '0') return { ok: false, reason: 'The URL must not use port 0.' };
  return { ok: true, url };
}

/**
 * @example
 * await checkWebhookUrl('https://hooks.example.com/in', false) // { ok: true, url, addresses: [...] }
 * await checkWebhookUrl('http://0x7f.1/', false)
 * // { ok: false, reason: URL_NOT_ALLOWED, detail: "The URL's host 127.0.0.1 is a loopback address." }
 */
export async function checkWebhookUrl(
  text: string,
  allowPrivate: boolean,
  options: CheckOptions = {},
): Promise<WebhookUrlCheck> {
  const parsed = parseWebhookUrl(text);
  if (!parsed.ok) return parsed;
  const { url } = parsed;
  // WHATWG URL has already turned every IPv4 spelling (0x7f.1, 2130706433, 0177.0.0.1, 127.1) into a
  // dotted quad and brackets IPv6, so an IP literal is recognised here and never sent to DNS.
  const host = url.hostname;
  const literal = host.startsWith('[') ? host.slice(1, -1) : isIPv4(host) ? host : undefined;
  let addresses: string[];
  if (literal !== undefined) addresses = [literal];
  else {
    const resolved = await resolveHost(host, options);
    if (!resolved.ok) return resolved;
    addresses = resolved.addresses;
  }
  if (!allowPrivate) {
    for (const address of addresses) {
      const kind = refusedAddress(address);
      if (kind === undefined) continue;
      // Not even the kind reaches the client (see above); nor an address in the detail, which logs keep.
      const what = literal !== undefined ? 'is' : 'resolves to';
      return {
        ok: false,
        reason: URL_NOT_ALLOWED,
        detail: `The URL's host ${host} ${what} ${article(kind)} ${kind} address.`,
      };
    }
  }
  return { ok: true, url, addresses };
}

const article = (word: string) => (/^[aeiou]/.test(word) ? 'an' : 'a');

async function defaultResolve(host: string): Promise<string[]> {
  const found = await lookup(host, { all: true, verbatim: true });
  return found.map((a) => a.address);
}

async function resolveHost(
  host: string,
  options: CheckOptions,
): Promise<{ ok: true; addresses: string[] } | { ok: false; reason: string; detail: string; transient?: true }> {
  const timeoutMs = options.timeoutMs ?? 5000;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<'timeout'>((done) => {
    timer = setTimeout(() => done('timeout'), timeoutMs);
  });
  const refused = (detail: string, transient?: true) =>
    ({ ok: false, reason: URL_NOT_ALLOWED, detail, ...(transient && { transient }) }) as const;
  try {
    const found = await Promise.race([(options.resolve ?? defaultResolve)(host), timeout]);
    if (found === 'timeout') return refused(`The URL's host ${host} did not resolve within ${timeoutMs} ms.`, true);
    if (found.length === 0) return refused(`The URL's host ${host} does not resolve to any address.`);
    return { ok: true, addresses: found };
  } catch (e) {
    const code = (e as { code?: unknown })?.code;
    if (code === 'ENOTFOUND' || code === 'ENODATA' || code === 'EAI_NONAME')
      return refused(`The URL's host ${host} does not resolve to any address.`);
    return refused(
      `The URL's host ${host} could not be resolved${typeof code === 'string' ? ` (${code})` : ''}.`,
      true,
    );
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The kind of a non-public address ("loopback", "private", …), or undefined for a globally
 * reachable one. Takes the text forms DNS and URLs give: dotted-quad IPv4, or IPv6 (an IPv6 zone
 * such as `%eth0` is ignored). Anything else is "invalid".
 */
export function refusedAddress(address: string): string | undefined {
  const zoneless = address.replace(/%.*$/, '');
  if (isIPv4(zoneless)) return ipv4Kind(ipv4Number(zoneless));
  if (isIPv6(zoneless)) return ipv6Kind(ipv6Bytes(zoneless));
  return 'invalid';
}

interface V4Range {
  base: number;
  bits: number;
  kind: string;
}

const v4 = (cidr: string, kind: string): V4Range => {
  const [base, bits] = cidr.split('/');
  return { base: ipv4Number(base!), bits: Number(bits), kind };
};

// IANA IPv4 Special-Purpose Address Registry, the entries not globally reachable, with multicast
// and broadcast. 192.0.0.9 and .10 (PCP and TURN anycast) are global within 192.0.0.0/24.
const V4_GLOBAL_EXCEPTIONS = [v4('192.0.0.9/32', ''), v4('192.0.0.10/32', '')];
const V4_REFUSED = [
  v4('0.0.0.0/32', 'unspecified'),
  v4('0.0.0.0/8', 'reserved ("this network")'),
  v4('10.0.0.0/8', 'private'),
  v4('100.64.0.0/10', 'shared (CGNAT)'),
  v4('127.0.0.0/8', 'loopback'),
  v4('169.254.0.0/16', 'link-local'),
  v4('172.16.0.0/12', 'private'),
  v4('192.0.0.0/24', 'reserved (IETF protocol assignments)'),
  v4('192.0.2.0/24', 'documentation'),
  v4('192.168.0.0/16', 'private'),
  v4('198.18.0.0/15', 'benchmarking'),
  v4('198.51.100.0/24', 'documentation'),
  v4('203.0.113.0/24', 'documentation'),
  v4('224.0.0.0/4', 'multicast'),
  v4('255.255.255.255/32', 'broadcast'),
  v4('240.0.0.0/4', 'reserved'),
];

const inV4 = (n: number, r: V4Range) => r.bits === 0 || n >>> (32 - r.bits) === r.base >>> (32 - r.bits);

function ipv4Kind(n: number): string | undefined {
  if (V4_GLOBAL_EXCEPTIONS.some((r) => inV4(n, r))) return undefined;
  return V4_REFUSED.find((r) => inV4(n, r))?.kind;
}

function ipv4Number(dotted: string): number {
  return dotted.split('.').reduce((n, part) => n * 256 + Number(part), 0);
}

interface V6Range {
  bytes: Uint8Array;
  bits: number;
  kind: string;
}

const v6 = (cidr: string, kind: string): V6Range => {
  const [base, bits] = cidr.split('/');
  return { bytes: ipv6Bytes(base!), bits: Number(bits), kind };
};

function inV6(b: Uint8Array, r: V6Range): boolean {
  for (let bit = 0; bit < r.bits; bit += 8) {
    const take = Math.min(8, r.bits - bit);
    const mask = (0xff << (8 - take)) & 0xff;
    if ((b[bit / 8]! & mask) !== (r.bytes[bit / 8]! & mask)) return false;
  }
  return true;
}

const embeddedV4 = (b: Uint8Array, at: number) =>
  ((b[at]! << 24) | (b[at + 1]! << 16) | (b[at + 2]! << 8) | b[at + 3]!) >>> 0;

// Forms that carry an IPv4 address, judged by it: IPv4-mapped, NAT64's well-known prefix, 6to4.
const V6_EMBEDDING: { range: V6Range; at: number }[] = [
  { range: v6('::ffff:0:0/96', ''), at: 12 },
  { range: v6('64:ff9b::/96', ''), at: 12 },
  { range: v6('2002::/16', ''), at: 2 },
];
// IANA IPv6 Special-Purpose Address Registry: globally reachable entries inside 2001::/23.
const V6_GLOBAL_EXCEPTIONS = [
  v6('2001:1::1/128', ''),
  v6('2001:1::2/128', ''),
  v6('2001:1::3/128', ''),
  v6('2001:3::/32', ''),
  v6('2001:4:112::/48', ''),
  v6('2001:20::/28', ''),
  v6('2001:30::/28', ''),
];
// Outside 2000::/3 nothing is global unicast; these name the common kinds, the rest is "reserved".
const V6_REFUSED = [
  v6('::/128', 'unspecified'),
  v6('::1/128', 'loopback'),
  v6('fc00::/7', 'private (unique local)'),
  v6('fe80::/10', 'link-local'),
  v6('fec0::/10', 'site-local'),
  v6('ff00::/8', 'multicast'),
  v6('2001:db8::/32', 'documentation'),
  v6('3fff::/20', 'documentation'),
  v6('2001::/23', 'reserved (IETF protocol assignments)'),
];
const V6_GLOBAL_UNICAST = v6('2000::/3', '');

function ipv6Kind(b: Uint8Array): string | undefined {
  for (const { range, at } of V6_EMBEDDING) if (inV6(b, range)) return ipv4Kind(embeddedV4(b, at));
  if (V6_GLOBAL_EXCEPTIONS.some((r) => inV6(b, r))) return undefined;
  const kind = V6_REFUSED.find((r) => inV6(b, r))?.kind;
  if (kind !== undefined) return kind;
  return inV6(b, V6_GLOBAL_UNICAST) ? undefined : 'reserved';
}

/** The 16 bytes of a valid IPv6 text (`::` and a trailing dotted quad included). */
function ipv6Bytes(text: string): Uint8Array {
  let groups: number[] = [];
  let tail = text;
  const quad = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  const extra: number[] = [];
  if (quad) {
    const n = ipv4Number(quad[1]!);
    extra.push(n >>> 16, n & 0xffff);
    tail = text.slice(0, -quad[1]!.length);
    if (tail.endsWith(':') && !tail.endsWith('::')) tail = tail.slice(0, -1);
  }
  const parse = (s: string) => (s === '' ? [] : s.split(':').map((h) => parseInt(h, 16)));
  const gap = tail.indexOf('::');
  if (gap < 0) groups = [...parse(tail), ...extra];
  else {
    const head = parse(tail.slice(0, gap));
    const rest = [...parse(tail.slice(gap + 2)), ...extra];
    groups = [...head, ...new Array<number>(8 - head.length - rest.length).fill(0), ...rest];
  }
  const bytes = new Uint8Array(16);
  groups.forEach((g, i) => {
    bytes[i * 2] = g >> 8;
    bytes[i * 2 + 1] = g & 0xff;
  });
  return bytes;
}
