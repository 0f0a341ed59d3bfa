import ipaddr from 'ipaddr.js';

/**
 * The client network of an address as the HTTP layer hands it (an IPv4 address, or an IPv6 address or
 * network such as "2001:db8::/64"): its /`ipv4Prefix` or /`ipv6Prefix` network ("203.0.113.0/24"), since
 * one attacker holds every address in one. Fair shares inside a shared allowance (a key's streams, its
 * project's precondition pool, the relayer's loss budgets) are counted by it. Anything that is not an
 * address (a test's placeholder) is its own network.
 */
export function clientNetwork(ip: string | null | undefined, prefix: { ipv4Prefix: number; ipv6Prefix: number }): string | null {
  if (!ip) return null;
  const [addr, len] = ip.split('/');
  if (!ipaddr.isValid(addr)) return ip;
  const a = ipaddr.process(addr);
  if (a.kind() === 'ipv4') return `${ipaddr.IPv4.networkAddressFromCIDR(`${a.toString()}/${prefix.ipv4Prefix}`).toString()}/${prefix.ipv4Prefix}`;
  const bits = Math.min(prefix.ipv6Prefix, len ? Number(len) : 128);
  return `${ipaddr.IPv6.networkAddressFromCIDR(`${a.toString()}/${bits}`).toString()}/${bits}`;
}
