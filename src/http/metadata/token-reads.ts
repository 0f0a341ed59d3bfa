// A token read for an API caller: the unseen tokens are fetched in the caller's share (issue 54), and
// a full share is answered 429 with Retry-After and the share's name, in the words of the route.

import type { Address } from 'viem';
import type { ChainClient } from '../../chain/client.ts';
import type { Services } from '../../services.ts';
import { FetchShareFull, type FetchCaller } from '../../metadata/tokens/fetch-shares.ts';
import type { GetTokensResult } from '../../metadata/tokens/resolver.ts';
import { clientAddress } from '../core/client-address.ts';
import { RpcError, type ErrorDef } from '../core/errors.ts';

/** What a caller's token read needs: the token service, and the config's client network prefix (keyless callers' queues). */
export type TokenReadDeps = Pick<Services, 'tokens' | 'config'>;

/** A key's reads share its key's queue; keyless reads queue by client address and draw from the keyless share. */
export function fetchCallerOf(s: TokenReadDeps, keyId: number | null, ip: string): FetchCaller {
  if (keyId !== null) return { queue: `k${keyId}`, keyless: false };
  return { queue: `anon:${clientAddress(ip, s.config.clientIpv6Prefix)}`, keyless: true };
}

export async function readTokens(s: TokenReadDeps, chain: ChainClient, contract: Address, ids: string[], caller: FetchCaller, rateLimited: ErrorDef): Promise<GetTokensResult> {
  try {
    return await s.tokens.getTokens(chain, contract, ids, { caller });
  } catch (err) {
    if (err instanceof FetchShareFull) throw new RpcError(rateLimited, `${err.share}: ${err.message}`, { 'Retry-After': String(err.retryAfterSec) });
    throw err;
  }
}

/** Charges one fetch made for `caller` outside a token read (a media file fetched by the /media route), in the words of the route. */
export function chargeFetch(s: TokenReadDeps, caller: FetchCaller, rateLimited: ErrorDef): void {
  try {
    s.tokens.admitFetches(caller, 1);
  } catch (err) {
    if (err instanceof FetchShareFull) throw new RpcError(rateLimited, `${err.share}: ${err.message}`, { 'Retry-After': String(err.retryAfterSec) });
    throw err;
  }
}
