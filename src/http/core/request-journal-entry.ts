import type { FastifyRequest } from 'fastify';
import { clientNetwork } from '../../util/client-net.ts';
import type { Keyed } from './access-pipeline.ts';
import type { Services } from '../../services.ts';

/** What a request log note needs: the journal, and the config's client network prefix. */
export type JournalDeps = Pick<Services, 'requestJournal' | 'config'>;

/**
 * What the request log calls a request: a webrpc call by its service and method ("Metadata/GetTokenMetadata"),
 * anything else by its HTTP method and route pattern ("GET /tokens/:network/:contract/*"). Never the
 * URL as sent: no query string (where `?accessKey=` goes), no path parameter values. `route` is the
 * pattern the request was answered under (the router's, or the one an early answer stands for).
 */
export function requestName(httpMethod: string | undefined, url: string, route: string | undefined): string {
  const path = url.split('?')[0];
  const rpc = path.indexOf('/rpc/');
  const name = rpc >= 0 ? path.slice(rpc + 5) : `${httpMethod} ${route ?? 'unmatched'}`;
  return name.length > 200 ? name.slice(0, 200) : name;
}

/** Notes one answered request of a project in its request log: by the router, or before routing (early-answers.ts), in the same words. */
export function journalNote(s: JournalDeps, keyed: Keyed, name: string, ip: string | undefined, status: number, ms: number): void {
  s.requestJournal.note({
    projectId: keyed.projectId,
    keyId: keyed.keyId,
    at: new Date(),
    method: name,
    status,
    ms: Math.round(ms * 10) / 10,
    // An IPv4 /24, an IPv6 network of clientIpv6Prefix bits: where from, not who.
    clientNet: clientNetwork(ip, { ipv4Prefix: 24, ipv6Prefix: s.config.clientIpv6Prefix }),
  });
}

/** Notes a request the router answered. */
export function journalRouted(s: JournalDeps, keyed: Keyed, req: FastifyRequest, status: number, ms: number): void {
  journalNote(s, keyed, requestName(req.method, req.url, req.routeOptions.url), req.ip, status, ms);
}
