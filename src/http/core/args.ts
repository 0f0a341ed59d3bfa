import type { Address } from 'viem';
import { z } from 'zod';
import type { ChainClient } from '../../chain/client.ts';
import { parseTokenId } from '../../metadata/tokens/token-id.ts';
import type { Services } from '../../services.ts';
import { RpcError, type ServiceErrorMap } from './errors.ts';
import { targetProblem } from '../../untrusted/post.ts';
import { pageSizeUpTo } from './page.ts';

/** What chainFor reads: the configured networks and their clients. */
export type ChainArgDeps = Pick<Services, 'networks' | 'chains'>;
/** What chainIdsFor reads: the configured networks (and the well-known ones they know). */
export type ChainIdDeps = Pick<Services, 'networks'>;

/** A method that takes no arguments (unknown keys are let through, as Sequence's servers do). */
export const NoArgs = z.object({}).loose();

/** Accepts a chain as the clients send it: a string, or a bare number from lenient callers. */
export const ChainArg = z.union([z.string(), z.number().int()]).transform(String);

export const AddressArg = z
  .string()
  .trim()
  .regex(/^0x[0-9a-fA-F]{40}$/, 'not a 20-byte 0x address')
  .transform((a) => a.toLowerCase() as Address);

function toTokenId(v: string | number, ctx: z.RefinementCtx): string {
  const id = parseTokenId(v);
  if (id === null) {
    ctx.addIssue({ code: 'custom', message: `"${String(v).slice(0, 80)}" is not a uint256 token id (decimal or 0x hex)` });
    return z.NEVER;
  }
  return id;
}

/** A token id as the canonical decimal string; `31`, `"0x1f"` and `"31"` are the same token. */
export const TokenIdArg = z.union([z.string(), z.number().int().nonnegative()]).transform(toTokenId);
export const TokenIdString = z.string().transform(toTokenId);

/** A configured chain with a client, or the service's ChainNotFound error naming the problem. */
export function chainFor(s: ChainArgDeps, chainID: string, errors: ServiceErrorMap): ChainClient {
  const found = s.networks.lookup(chainID);
  if (!found.ok) throw new RpcError(errors.chainNotFound, found.message);
  const client = s.chains.get(found.chain.chainId);
  if (!client) throw new RpcError(errors.chainNotFound, `chain ${found.chain.name} has no client`);
  return client;
}

/** Chain ids for a search filter: configured chains, or well-known ones the directory may hold. */
export function chainIdsFor(s: ChainIdDeps, inputs: string[], errors: ServiceErrorMap): number[] {
  return inputs.map((input) => {
    const id = s.networks.chainIdOf(input);
    if (id !== undefined) return id;
    const found = s.networks.lookup(input);
    throw new RpcError(errors.chainNotFound, found.ok ? `chain "${input}"` : found.message);
  });
}

/** The metadata Page: numbered from 0, `pageSize` items each (default 20, at most 100: a larger size gets 100). */
export const PageArg = z
  .object({
    page: z.number().int().min(0).optional(),
    pageSize: pageSizeUpTo(100).optional(),
  })
  .loose()
  .optional();

/** A webhook's URL (Console webhooks, indexer listeners): http(s), not to a private or loopback address as written (events/post.ts). */
export const WebhookUrlArg = z
  .string()
  .trim()
  .max(2_000)
  .superRefine((u, ctx) => {
    const problem = targetProblem(u);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  });
