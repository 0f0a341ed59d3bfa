// One outbound JSON POST to a user-given URL (webhook deliveries, sponsorship approvals), behind the
// same SSRF guard as metadata fetching: the address is vetted inside the socket's own DNS lookup (no
// rebinding window), literal IPs are vetted before connecting, and redirects are answered, not followed.
// The promise never rejects.

import dns from 'node:dns/promises';
import http from 'node:http';
import https from 'node:https';
import { BlockedAddressError, createHostAllowlist, guardedLookup, stripBrackets } from './address-guard.ts';
import { isBlockedAddress, isIpLiteral } from './ip.ts';

export interface PostResult {
  /** HTTP status, or 0 when no answer came (refused, unreachable, timed out). */
  status: number;
  /** The first bytes of the answer (for the console and the approval's JSON). */
  body: string;
  ms: number;
  /** Why there is no answer, or why the answer does not count (a redirect). */
  error?: string;
  blocked?: boolean;
  timedOut?: boolean;
}

export interface PostOptions {
  allowPrivateNetworks: boolean;
  allowedPrivateHosts: readonly string[];
  userAgent?: string;
  /** Kept-alive connections per target host and pool (64 unless said): at least the delivery worker's concurrency, or its lanes queue for a socket. */
  maxSockets?: number;
}

const MAX_ANSWER = 4_096;
/** How long a registration waits for the name it vets to resolve. */
const VET_LOOKUP_MS = 3_000;

export type Poster = ((url: string, body: string, headers: Record<string, string>, deadlineMs: number) => Promise<PostResult>) & {
  /**
   * Why a delivery to this URL would be refused now, if it would (targetProblem, then the address rule
   * of the guard): for refusing a target when it is registered, with the reason, rather than only in its
   * deliveries. The guard still vets every delivery (a name may resolve elsewhere later).
   */
  vet(url: string): Promise<string | undefined>;
  close(): void;
};

/** A target URL is acceptable at registration: http(s), no credentials in it. Addresses are checked at delivery. */
export function targetProblem(raw: string): string | undefined {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return `"${raw.slice(0, 100)}" is not a URL`;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `the URL must be http or https, not ${url.protocol}`;
  if (url.username || url.password) return 'the URL must not carry credentials (the signature authenticates metarelay)';
  return undefined;
}

export function createPoster(opts: PostOptions): Poster {
  const allowlisted = createHostAllowlist(opts.allowedPrivateHosts);
  const pool = { keepAlive: true, maxSockets: opts.maxSockets ?? 64 };
  // Separate pools: a socket opened without the guard is never reused for a request that needs it.
  const guarded = { http: new http.Agent({ ...pool, lookup: guardedLookup }), https: new https.Agent({ ...pool, lookup: guardedLookup }) };
  const open = { http: new http.Agent(pool), https: new https.Agent(pool) };

  const post = (raw: string, body: string, headers: Record<string, string>, deadlineMs: number) =>
    new Promise<PostResult>((resolve) => {
      const started = performance.now();
      const ms = () => Math.round(performance.now() - started);
      const problem = targetProblem(raw);
      if (problem) return resolve({ status: 0, body: '', ms: 0, error: problem });
      const url = new URL(raw);
      const trusted = opts.allowPrivateNetworks || allowlisted(url);
      const host = stripBrackets(url.hostname);
      if (!trusted && isIpLiteral(host) && isBlockedAddress(host)) {
        return resolve({ status: 0, body: '', ms: 0, blocked: true, error: `refused: ${host} is a private or loopback address` });
      }
      let done = false;
      const chunks: Buffer[] = [];
      let size = 0;
      const finish = (r: Omit<PostResult, 'ms'>) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        resolve({ ...r, ms: ms() });
      };
      const https_ = url.protocol === 'https:';
      const agents = trusted ? open : guarded;
      const req = (https_ ? https : http).request({
        protocol: url.protocol,
        hostname: host,
        port: url.port || undefined,
        path: `${url.pathname}${url.search}`,
        method: 'POST',
        agent: https_ ? agents.https : agents.http,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'user-agent': opts.userAgent ?? 'metarelay-webhooks/0.1', ...headers },
      });
      const timer = setTimeout(() => {
        finish({ status: 0, body: '', timedOut: true, error: `no answer within ${deadlineMs} ms` });
        req.destroy();
      }, deadlineMs);
      req.on('error', (err) => {
        if (err instanceof BlockedAddressError) return finish({ status: 0, body: '', blocked: true, error: `refused: ${err.message}` });
        const e = err as NodeJS.ErrnoException;
        finish({ status: 0, body: '', error: e.code ? `${e.code}: ${e.message}` : e.message });
      });
      req.on('response', (res) => {
        const status = res.statusCode ?? 0;
        res.on('data', (c: Buffer) => {
          if (size < MAX_ANSWER) chunks.push(c);
          size += c.length;
        });
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8').slice(0, MAX_ANSWER);
          // A redirect is an answer that does not count: following it could reach an internal address.
          if (status >= 300 && status < 400) return finish({ status, body: text, error: `redirect to ${String(res.headers.location ?? '?').slice(0, 200)} not followed` });
          finish({ status, body: text });
        });
        res.on('error', (err) => finish({ status, body: '', error: err.message }));
      });
      req.end(body);
    });
  const vet = async (raw: string): Promise<string | undefined> => {
    const problem = targetProblem(raw);
    if (problem) return problem;
    const url = new URL(raw);
    if (opts.allowPrivateNetworks || allowlisted(url)) return undefined;
    const host = stripBrackets(url.hostname);
    // A name that does not exist cannot be delivered to; a resolver failing now, or slow to answer, may
    // work later (every delivery is vetted again): the registration is not held up by it.
    const found = isIpLiteral(host)
      ? [host]
      : await Promise.race([
          dns.lookup(host, { all: true }).then(
            (list) => list.map((a) => a.address),
            (err: NodeJS.ErrnoException) => (err.code === 'ENOTFOUND' ? null : []),
          ),
          new Promise<string[]>((resolve) => setTimeout(() => resolve([]), VET_LOOKUP_MS).unref()),
        ]);
    if (found === null) return `${host} does not resolve`;
    const blocked = found.find((a) => isBlockedAddress(a));
    if (!blocked) return undefined;
    return `${host === blocked ? host : `${host} resolves to ${blocked}, which`} is a private, loopback or otherwise non-public address (allowed only with allowPrivateNetworks or webhooks.allowedPrivateHosts)`;
  };
  return Object.assign(post, {
    vet,
    close() {
      for (const a of [guarded.http, guarded.https, open.http, open.https]) a.destroy();
    },
  });
}
