import { z } from 'zod';
import { MetadataErrors, RpcError } from '../http/index.ts';
import type { Services } from '../services.ts';

/** What the chain arguments and names are read from: the configured (and well-known) networks. */
export type ConsoleArgDeps = Pick<Services, 'networks'>;

export const ProjectId = z.number().int().positive();
export const Id = z.number().int().positive();
/** An amount in wei as a decimal string (uint256). */
export const Wei = z
  .string()
  .trim()
  .regex(/^\d{1,78}$/, 'must be a decimal amount of wei')
  .transform((v) => BigInt(v));

/** A chain for rules and filters: a configured one, or a well-known network the rules may be kept for. */
export function chainIdArg(s: ConsoleArgDeps, chainID: string): number {
  const id = s.networks.chainIdOf(chainID);
  if (id !== undefined) return id;
  const found = s.networks.lookup(chainID);
  throw new RpcError(MetadataErrors.ChainNotFound, found.ok ? `chain "${chainID}"` : found.message);
}

export const chainName = (s: ConsoleArgDeps, chainId: number) => s.networks.list().find((c) => c.chainId === chainId)?.name ?? String(chainId);

/** Cursor paging: the cursor a previous page answered (`nextCursor`), and how many rows a page holds. */
export const PageArgs = {
  cursor: z.string().trim().min(1).max(200).optional(),
  pageSize: z.number().int().min(1).max(200).optional(),
};

/** A date filter: a day (YYYY-MM-DD, UTC midnight) or an ISO time. */
export const When = z
  .string()
  .trim()
  .regex(/^\d{4}-\d{2}-\d{2}([T ][\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$/, 'must be a day (YYYY-MM-DD) or an ISO time')
  .transform((v, ctx) => {
    const d = new Date(/^\d{4}-\d{2}-\d{2}$/.test(v) ? `${v}T00:00:00Z` : v);
    if (Number.isNaN(d.getTime())) ctx.addIssue({ code: 'custom', message: `"${v}" is not a date` });
    return d;
  });

/** A cursor that is a row id (lists ordered by id, newest first); anything else is not a cursor this API gave. */
export function idCursor(cursor: string | undefined): number | undefined {
  if (cursor === undefined) return undefined;
  if (!/^\d{1,15}$/.test(cursor)) throw new RpcError(MetadataErrors.InvalidArgument, `cursor "${cursor}" is not one this API answered`);
  return Number(cursor);
}

/** One page of rows read with one extra: the rows to show, and the cursor of the next page (null on the last). */
export function cutPage<T>(rows: T[], size: number, cursorOf: (r: T) => string): { rows: T[]; nextCursor: string | null } {
  return { rows: rows.slice(0, size), nextCursor: rows.length > size ? cursorOf(rows[size - 1]) : null };
}
