// SSRF enforcement at connect time. The check runs inside the socket's own DNS
// lookup, so the address we vet is exactly the address we connect to and DNS
// rebinding between a check and the connect cannot happen.

import dns from 'node:dns';
import type { LookupFunction } from 'node:net';
import { isBlockedAddress, parseIPv6 } from './ip.ts';

export class BlockedAddressError extends Error {
  readonly code = 'EBLOCKEDADDRESS';
  constructor(
    readonly host: string,
    readonly address: string,
  ) {
    super(`${host} resolves to blocked address ${address}`);
    this.name = 'BlockedAddressError';
  }
}

export const guardedLookup: LookupFunction = (hostname, options, callback) => {
  dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
    const empty = options.all ? [] : '';
    if (err) return callback(err, empty);
    // One private answer poisons the name: otherwise a resolver could mix a
    // public and a private record and let happy-eyeballs pick the private one.
    const blocked = addresses.find((a) => isBlockedAddress(a.address));
    if (blocked) return callback(new BlockedAddressError(hostname, blocked.address), empty);
    const first = addresses[0];
    if (!first) {
      const notFound: NodeJS.ErrnoException = new Error(`no addresses for ${hostname}`);
      notFound.code = 'ENOTFOUND';
      return callback(notFound, empty);
    }
    if (options.all) callback(null, addresses);
    else callback(null, first.address, first.family);
  });
};

export function stripBrackets(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

type AllowEntry = { host: string; port: number | null };

function parseAllowEntry(entry: string): AllowEntry {
  const e = entry.trim().toLowerCase();
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(e);
  if (bracketed) return { host: bracketed[1], port: bracketed[2] ? Number(bracketed[2]) : null };
  const hostPort = /^([^:]+):(\d+)$/.exec(e);
  if (hostPort) return { host: hostPort[1], port: Number(hostPort[2]) };
  return { host: e, port: null };
}

function sameHost(a: string, b: string): boolean {
  if (a === b) return true;
  const a6 = parseIPv6(a);
  return a6 !== null && a6 === parseIPv6(b);
}

export function effectivePort(url: URL): number {
  if (url.port) return Number(url.port);
  return url.protocol === 'https:' ? 443 : 80;
}

/**
 * Operator-approved exceptions to the SSRF rule, e.g. a local IPFS node:
 * "127.0.0.1:8080", "[::1]:8080", or "gateway.internal" for any port.
 */
export function createHostAllowlist(entries: readonly string[]): (url: URL) => boolean {
  const parsed = entries.map(parseAllowEntry);
  return (url) => {
    const host = stripBrackets(url.hostname.toLowerCase());
    const port = effectivePort(url);
    return parsed.some((entry) => sameHost(entry.host, host) && (entry.port === null || entry.port === port));
  };
}
