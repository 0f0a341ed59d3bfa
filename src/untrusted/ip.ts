// Classifies IP addresses for the SSRF guard. Pure and dependency-free so the
// rule can be unit-tested exhaustively and reused at connect time.
//
// Policy: fail closed. Anything we cannot parse unambiguously is blocked, and
// IPv6 is allowed only inside global unicast (2000::/3) minus the special
// ranges carved out of it, so newly assigned special ranges stay blocked.

type V4Range = readonly [base: string, bits: number];

// IANA IPv4 Special-Purpose Address Registry, plus multicast and class E.
const BLOCKED_V4: readonly V4Range[] = [
  ['0.0.0.0', 8], // "this network", includes the unspecified address
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // CGNAT shared address space
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, cloud metadata endpoints live here
  ['172.16.0.0', 12],
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // TEST-NET-1
  ['192.88.99.0', 24], // deprecated 6to4 relay anycast
  ['192.168.0.0', 16],
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // TEST-NET-2
  ['203.0.113.0', 24], // TEST-NET-3
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, includes broadcast 255.255.255.255
];

const V4_OCTET = /^(?:0|[1-9]\d{0,2})$/;

/** Strict dotted quad. Octal/hex/short forms are rejected because resolvers disagree on them. */
export function parseIPv4(text: string): number | null {
  const parts = text.split('.');
  if (parts.length !== 4) return null;
  let value = 0;
  for (const part of parts) {
    if (!V4_OCTET.test(part)) return null;
    const octet = Number(part);
    if (octet > 255) return null;
    value = value * 256 + octet;
  }
  return value;
}

const HEX_GROUP = /^[0-9a-f]{1,4}$/i;

/** Parses an IPv6 literal (brackets and zone id tolerated) into a 128-bit integer. */
export function parseIPv6(text: string): bigint | null {
  let s = text;
  if (s.startsWith('[') && s.endsWith(']')) s = s.slice(1, -1);
  const zone = s.indexOf('%');
  if (zone !== -1) s = s.slice(0, zone);
  if (s === '' || !s.includes(':')) return null;

  const halves = s.split('::');
  if (halves.length > 2) return null;
  const head = halves[0] === '' ? [] : halves[0].split(':');
  const tail = halves.length === 2 && halves[1] !== '' ? halves[1].split(':') : [];

  const groups: number[] = [];
  const pushGroups = (parts: string[], allowTrailingV4: boolean): boolean => {
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i];
      if (allowTrailingV4 && i === parts.length - 1 && part.includes('.')) {
        const v4 = parseIPv4(part);
        if (v4 === null) return false;
        groups.push(Math.floor(v4 / 0x10000), v4 % 0x10000);
      } else {
        if (!HEX_GROUP.test(part)) return false;
        groups.push(parseInt(part, 16));
      }
    }
    return true;
  };

  if (halves.length === 1) {
    if (!pushGroups(head, true) || groups.length !== 8) return null;
  } else {
    if (!pushGroups(head, false)) return null;
    const headLen = groups.length;
    if (!pushGroups(tail, true)) return null;
    const tailGroups = groups.splice(headLen);
    const missing = 8 - headLen - tailGroups.length;
    // "::" must stand for at least one zero group.
    if (missing < 1) return null;
    groups.push(...new Array<number>(missing).fill(0), ...tailGroups);
  }

  let value = 0n;
  for (const g of groups) value = (value << 16n) | BigInt(g);
  return value;
}

function v4InRange(ip: number, [base, bits]: V4Range): boolean {
  const baseValue = parseIPv4(base)!;
  const size = 2 ** (32 - bits);
  return Math.floor(ip / size) === Math.floor(baseValue / size);
}

export function isBlockedIPv4(ip: number): boolean {
  return BLOCKED_V4.some((range) => v4InRange(ip, range));
}

function v6Prefix(text: string): bigint {
  const value = parseIPv6(text);
  if (value === null) throw new Error(`bad built-in prefix ${text}`);
  return value;
}

function v6InRange(ip: bigint, base: bigint, bits: number): boolean {
  const shift = BigInt(128 - bits);
  return ip >> shift === base >> shift;
}

const LOW32 = 0xffffffffn;

// Prefixes whose low 32 bits carry an IPv4 address that decides the verdict.
const EMBEDS_V4_LOW32: readonly (readonly [bigint, number])[] = [
  [v6Prefix('::ffff:0:0'), 96], // IPv4-mapped
  [v6Prefix('::ffff:0:0:0'), 96], // SIIT IPv4-translated
  [v6Prefix('64:ff9b::'), 96], // NAT64 well-known prefix
];

const SIX_TO_FOUR = v6Prefix('2002::');
const GLOBAL_UNICAST = v6Prefix('2000::');

// Special ranges inside 2000::/3.
const BLOCKED_IN_GLOBAL: readonly (readonly [bigint, number])[] = [
  [v6Prefix('2001::'), 23], // IETF protocol assignments incl. Teredo, benchmarking, ORCHID
  [v6Prefix('2001:db8::'), 32], // documentation
  [v6Prefix('3fff::'), 20], // documentation (RFC 9637)
];

export function isBlockedIPv6(ip: bigint): boolean {
  for (const [base, bits] of EMBEDS_V4_LOW32) {
    if (v6InRange(ip, base, bits)) return isBlockedIPv4(Number(ip & LOW32));
  }
  if (v6InRange(ip, SIX_TO_FOUR, 16)) {
    return isBlockedIPv4(Number((ip >> 80n) & LOW32));
  }
  // Everything else outside global unicast is loopback, unspecified,
  // IPv4-compatible, ULA, link-local, site-local, multicast, discard or reserved.
  if (!v6InRange(ip, GLOBAL_UNICAST, 3)) return true;
  return BLOCKED_IN_GLOBAL.some(([base, bits]) => v6InRange(ip, base, bits));
}

/** True when a connection to `ip` must be refused under the SSRF rule. Unparseable input is blocked. */
export function isBlockedAddress(ip: string): boolean {
  const trimmed = ip.trim();
  const v4 = parseIPv4(trimmed);
  if (v4 !== null) return isBlockedIPv4(v4);
  const v6 = parseIPv6(trimmed);
  if (v6 !== null) return isBlockedIPv6(v6);
  return true;
}

/** True when `host` is an IP literal (brackets allowed) rather than a name to resolve. */
export function isIpLiteral(host: string): boolean {
  return parseIPv4(host) !== null || parseIPv6(host) !== null;
}
