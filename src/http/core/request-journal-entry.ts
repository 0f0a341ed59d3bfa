import type { FastifyRequest } from 'fastify';
import { clientNetwork } from '../../util/client-net.ts';
import type { Services } from '../../services.ts';

/** What a request log note needs: the journal, and the config's client network prefix. */
export type JournalDeps = Pick<Services, 'requestJournal' | 'config'>;

/**
 * What the request log calls a request: a webrpc call by its service and method ("Metadata/GetTokenMetadata"),
 * anything else by its HTTP method and route pattern ("GET /tokens/:chain/:contract/:tokenId"). Never the
 * URL as sent: no query string (where `?accessKey=` goes), no path parameter values.
 */
export function requestName(req: FastifyRequest): string {
  const path = req.url.split('?')[0];
  const rpc = path.indexOf('/rpc/');
  const name = rpc >= 0 ? path.slice(rpc + 5) : `${req.method} ${req.routeOptions.url ?? 'unmatched'}`;
  return name.length > 200 ? name.slice(0, 200) : name;
}

/** Notes one answered request of a project in its request log. */
export function journalNote(s: JournalDeps, keyed: { projectId: number; keyId: number }, req: FastifyRequest, status: number, ms: number): void {
  s.requestJournal.note({
    projectId: keyed.projectId,
    keyId: keyed.keyId,
    at: new Date(),
    method: requestName(req),
    status,
    ms: Math.round(ms * 10) / 10,
    // An IPv4 /24, an IPv6 network of clientIpv6Prefix bits: where from, not who.
    clientNet: clientNetwork(req.ip, { ipv4Prefix: 24, ipv6Prefix: s.config.clientIpv6Prefix }),
  });
}
