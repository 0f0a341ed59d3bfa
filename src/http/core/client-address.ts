import ipaddr from 'ipaddr.js';

/**
 * Who a request counts as for per-client limits and bars (the keyless rate bucket, the queue's
 * per-address share, receipt waiters, event streams, sign-in throttling, fee bars): an IPv4 address as
 * it is, an IPv6 address as its /`ipv6Prefix` network ("2001:db8:1:2::/64"). One subscriber is
 * routinely given a whole /64, so limits on the exact IPv6 address would bound nobody. An IPv4 address
 * mapped into IPv6 (a dual-stack socket) is the IPv4 address.
 */
export function clientAddress(ip: string, ipv6Prefix: number): string {
  if (!ipaddr.isValid(ip)) return ip;
  const a = ipaddr.process(ip);
  if (a.kind() === 'ipv4' || ipv6Prefix >= 128) return a.toString();
  return `${ipaddr.IPv6.networkAddressFromCIDR(`${a.toString()}/${ipv6Prefix}`).toString()}/${ipv6Prefix}`;
}
