import { z } from 'zod';
import { MetadataErrors, RpcError } from '../http/errors.ts';
import type { Services } from '../services.ts';

export const ProjectId = z.number().int().positive();
export const Id = z.number().int().positive();
/** An amount in wei as a decimal string (uint256). */
export const Wei = z
  .string()
  .trim()
  .regex(/^\d{1,78}$/, 'must be a decimal amount of wei')
  .transform((v) => BigInt(v));

/** A chain for rules and filters: a configured one, or a well-known network the rules may be kept for. */
export function chainIdArg(s: Services, chainID: string): number {
  const id = s.networks.chainIdOf(chainID);
  if (id !== undefined) return id;
  const found = s.networks.lookup(chainID);
  throw new RpcError(MetadataErrors.ChainNotFound, found.ok ? `chain "${chainID}"` : found.message);
}

export const chainName = (s: Services, chainId: number) => s.networks.list().find((c) => c.chainId === chainId)?.name ?? String(chainId);
