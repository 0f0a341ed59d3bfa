import type { Address } from 'viem';
import { z } from 'zod';
import { MAX_FEATURE_INDEX, type DirectoryFilter } from '../../metadata/contracts/directory.ts';
import type { Services } from '../../services.ts';
import { MetadataErrors, RpcError, metadataErrorMap as E } from '../core/errors.ts';
import { method, type MethodDef, type RpcContext } from '../core/webrpc.ts';
import { AddressArg, ChainArg, PageArg, chainIdsFor, type ChainIdDeps } from '../core/args.ts';
import { nextPage } from '../core/page.ts';

/** What the public token directory methods use: the directory, and the chain ids' lookup. */
export type DirectoryDeps = ChainIdDeps & Pick<Services, 'directory'>;
/** What the directory's admin methods use besides: the configured chains, the contract and token stores, the refresh queue and its worker. */
export type DirectoryAdminDeps = DirectoryDeps & Pick<Services, 'chains' | 'contractStore' | 'tokenStore' | 'refresh' | 'worker'>;

const allowedOf = (ctx: RpcContext) => ctx.project?.allowedChainIds ?? null;

const Flags = { includeTestnets: z.boolean().optional(), onlyFeatured: z.boolean().optional() };
const FeatureIndex = z.number().int().min(0).max(MAX_FEATURE_INDEX, `featureIndex is a uint8 (0 to ${MAX_FEATURE_INDEX})`);
const Query = z.string().trim().min(1, 'query must not be empty').max(200);
const DateArg = z
  .string()
  .refine((v) => !Number.isNaN(Date.parse(v)), 'before must be a date (RFC 3339)')
  .transform((v) => new Date(v));

/** A chain the directory may hold: configured, or a well-known network a token list named. */
const chainIdOf = (s: ChainIdDeps, chain: string | number) => chainIdsFor(s, [String(chain)], E)[0]!;

function filterOf(
  s: ChainIdDeps,
  a: { chain?: string | number; includeTestnets?: boolean; onlyFeatured?: boolean; page?: { page?: number; pageSize?: number } },
  ctx: RpcContext | null,
): DirectoryFilter {
  return {
    ...(a.chain !== undefined && a.chain !== '' ? { chainId: chainIdOf(s, a.chain) } : {}),
    includeTestnets: !!a.includeTestnets,
    onlyFeatured: !!a.onlyFeatured,
    allowed: ctx ? allowedOf(ctx) : null,
    page: a.page?.page ?? 0,
    pageSize: a.page?.pageSize ?? 20,
  };
}

/** The public token directory methods of the Metadata service (and their deprecated names). */
export function directoryMethods(s: DirectoryDeps): Record<string, MethodDef<any>> {
  const networks = async (a: { includeTestnets?: boolean; onlyFeatured?: boolean }, ctx: RpcContext) =>
    s.directory.networks({ includeTestnets: !!a.includeTestnets, onlyFeatured: !!a.onlyFeatured, allowed: allowedOf(ctx) });
  const list = async (a: Parameters<typeof filterOf>[1], ctx: RpcContext) => {
    const f = filterOf(s, a, ctx);
    const { contracts, more } = await s.directory.list(f);
    return { contracts, page: nextPage(f, more) };
  };
  const search = async (q: string, a: Parameters<typeof filterOf>[1], ctx: RpcContext) => {
    const f = filterOf(s, a, ctx);
    const { contracts, more } = await s.directory.search(q, f);
    return { contracts, page: nextPage(f, more) };
  };
  return {
    GetTokenDirectoryNetworks: method({
      input: z.object(Flags),
      handler: async (a, ctx) => {
        const n = await networks(a, ctx);
        return { chainIDs: n.map((x) => x.chainId), networks: n.map((x) => x.name) };
      },
    }),
    GetTokenDirectory: method({
      input: z.object({ chainID: ChainArg.optional(), ...Flags, page: PageArg }),
      handler: (a, ctx) => list({ ...a, chain: a.chainID }, ctx),
    }),
    SearchTokenDirectory: method({
      input: z.object({ query: Query, chainID: z.number().int().positive().optional(), ...Flags, page: PageArg }),
      handler: (a, ctx) => search(a.query, { ...a, chain: a.chainID }, ctx),
    }),
    DirectoryGetNetworks: method({
      input: z.object(Flags),
      handler: async (a, ctx) => ({ networks: (await networks(a, ctx)).map((x) => x.chainId) }),
    }),
    DirectoryGetCollections: method({
      input: z.object({ chainId: z.number().int().positive().optional(), ...Flags, page: PageArg }),
      handler: async (a, ctx) => {
        const r = await list({ ...a, chain: a.chainId }, ctx);
        return { collections: r.contracts, page: r.page };
      },
    }),
    DirectorySearchCollections: method({
      input: z.object({ query: Query, chainId: z.number().int().positive().optional(), ...Flags, page: PageArg }),
      handler: async (a, ctx) => {
        const r = await search(a.query, { ...a, chain: a.chainId }, ctx);
        return { collections: r.contracts, page: r.page };
      },
    }),
  };
}

/** Operators' curation of the directory and bulk refreshes, in the Admin service (admin token). */
export function directoryAdminMethods(s: DirectoryAdminDeps): Record<string, MethodDef<any>> {
  const Target = { chainID: ChainArg, contractAddress: AddressArg };
  const Legacy = { chainHandle: ChainArg, contractAddress: AddressArg };
  const featureIndexOf = async (chain: string, address: Address) => (await s.directory.featureIndexOf(chainIdOf(s, chain), address)) ?? 0;
  const setIndex = async (chain: string, address: Address, featureIndex: number) => {
    if (!(await s.directory.setFeatureIndex(chainIdOf(s, chain), address, featureIndex))) {
      throw new RpcError(MetadataErrors.NotFound, 'the contract is not in the token directory: add it first');
    }
    return { ok: true };
  };
  const nudge = <T>(v: T) => (s.worker.nudge(), v);
  return {
    IsInTokenDirectory: method({
      input: z.object(Target),
      handler: async (a) => {
        const index = await s.directory.featureIndexOf(chainIdOf(s, a.chainID), a.contractAddress);
        return { ok: index !== null, featureIndex: index ?? 0 };
      },
    }),
    SetTokenDirectoryFeatureIndex: method({
      input: z.object({ ...Target, featureIndex: FeatureIndex }),
      handler: (a) => setIndex(a.chainID, a.contractAddress, a.featureIndex),
    }),
    AddContractToTokenDirectory: method({
      input: z.object(Target),
      handler: async (a) => (await s.directory.add(chainIdOf(s, a.chainID), [a.contractAddress]), { ok: true }),
    }),
    RemoveContractFromTokenDirectory: method({
      input: z.object(Target),
      handler: async (a) => ({ ok: await s.directory.remove(chainIdOf(s, a.chainID), a.contractAddress) }),
    }),
    RefreshTokenDirectory: method({
      input: z.object({}).loose(),
      handler: async () => {
        const ids: number[] = [];
        for (const { chain, addresses } of await s.directory.readableEntries()) {
          if (addresses.length) ids.push((await s.refresh.enqueueContracts(null, chain, addresses)).taskId);
        }
        if (!ids.length) throw new RpcError(MetadataErrors.NotFound, 'the token directory has no contract on a chain this server reads');
        // One task per chain; `taskIDs` names them all (the schema's `taskID` is the first).
        return nudge({ taskID: ids[0], taskIDs: ids });
      },
    }),
    RefreshContractInfoUpdatedBefore: method({
      input: z.object({ before: DateArg, maxContractNumber: z.number().int().min(1).max(100_000, 'at most 100000 contracts per call') }),
      handler: async (a) => {
        const ids: number[] = [];
        for (const [chainId, addresses] of await s.contractStore.updatedBefore(a.before, a.maxContractNumber, [...s.chains.keys()])) {
          ids.push((await s.refresh.enqueueContracts(null, s.chains.get(chainId)!, addresses)).taskId);
        }
        return nudge({ taskIDs: ids });
      },
    }),
    RefreshTokenMetadataUpdatedBefore: method({
      input: z.object({ before: DateArg, maxTokenNumber: z.number().int().min(1).max(100_000, 'at most 100000 tokens per call') }),
      handler: async (a) => {
        const ids: number[] = [];
        for (const g of await s.tokenStore.updatedBefore(a.before, a.maxTokenNumber, [...s.chains.keys()])) {
          const r = await s.refresh.enqueueTokens(null, s.chains.get(g.chainId)!, g.contract, g.tokenIds, { source: 'admin' });
          if (!ids.includes(r.taskId)) ids.push(r.taskId);
        }
        return nudge({ taskIDs: ids });
      },
    }),
    // Deprecated names older SDKs call.
    AddContractsToTokenDirectory: method({
      input: z
        .object({
          contracts: z
            .array(z.object({ chainId: z.number().int().positive(), address: AddressArg }).loose())
            .min(1)
            .max(1000, 'at most 1000 contracts per call'),
          featureIndexes: z.array(FeatureIndex).optional(),
        })
        .refine((a) => !a.featureIndexes?.length || a.featureIndexes.length === a.contracts.length, 'featureIndexes must be empty or one per contract'),
      handler: async (a) => {
        for (const [i, c] of a.contracts.entries()) await s.directory.add(chainIdOf(s, c.chainId), [c.address], a.featureIndexes?.[i]);
        return { ok: true };
      },
    }),
    RemoveContractsFromTokenDirectory: method({
      input: z.object({ chainHandle: ChainArg, contracts: z.array(AddressArg).min(1).max(1000, 'at most 1000 contracts per call') }),
      handler: async (a) => {
        const chainId = chainIdOf(s, a.chainHandle);
        for (const c of a.contracts) await s.directory.remove(chainId, c);
        return { ok: true };
      },
    }),
    ModifyFeatureIndex: method({
      input: z.object({ ...Legacy, featured: FeatureIndex }),
      handler: (a) => setIndex(a.chainHandle, a.contractAddress, a.featured),
    }),
    GetFeatureIndex: method({
      input: z.object(Legacy),
      handler: async (a) => ({ featured: await featureIndexOf(a.chainHandle, a.contractAddress) }),
    }),
    ListTokenDirectory: method({
      input: z.object({ chainID: z.number().int().positive().optional(), ...Flags, page: PageArg }),
      handler: async (a) => {
        const f = filterOf(s, { ...a, chain: a.chainID }, null);
        const { contracts, more } = await s.directory.list(f);
        return { page: nextPage(f, more), collections: contracts };
      },
    }),
  };
}
