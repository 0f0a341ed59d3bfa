import { z } from 'zod';
import { metadataErrorMap } from '../core/errors.ts';
import { RpcError, MetadataErrors } from '../core/errors.ts';
import { RawJson, ReusableJson, method, type ServiceDef } from '../core/webrpc.ts';
import { AddressArg, ChainArg, TokenIdArg, chainFor } from '../core/args.ts';
import { runtimeStatus, seesDetail, versionInfo, type StatusDeps } from '../health/status-methods.ts';
import { NoArgs } from '../core/args.ts';
import { contractMethods, type ContractReadDeps } from './contracts.ts';
import { refreshMethods, type RefreshDeps } from './refresh.ts';
import { legacySyncMethods, type LegacySyncDeps } from './legacy-sync.ts';
import { tokenSearchMethods, type TokenSearchDeps } from './token-search.ts';
import { directoryMethods, type DirectoryDeps } from './directory.ts';
import { fetchCallerOf, readTokens, type TokenReadDeps } from './token-reads.ts';
import type { MetadataReadShares } from './read-shares.ts';

/** What the Metadata service uses: what its groups of methods, token reads and RuntimeStatus use. */
export type MetadataServiceDeps = StatusDeps & TokenReadDeps & ContractReadDeps & RefreshDeps & LegacySyncDeps & TokenSearchDeps & DirectoryDeps;

export const METADATA_SCHEMA = 'sequence-metadata@v0.4.0';

/** Documented limits: GetTokenMetadata takes up to 100 ids; the batch form 50 contracts × 50 ids. */
export const LIMITS = { tokensPerCall: 100, batchContracts: 50, batchTokensPerContract: 50 } as const;

const GetTokenMetadataArgs = z.object({
  chainID: ChainArg,
  contractAddress: AddressArg,
  tokenIDs: z.array(TokenIdArg).max(LIMITS.tokensPerCall, `at most ${LIMITS.tokensPerCall} tokenIDs per call`),
});

const GetTokenMetadataBatchArgs = z.object({
  chainID: ChainArg,
  contractTokenMap: z
    .record(z.string(), z.array(TokenIdArg).max(LIMITS.batchTokensPerContract, `at most ${LIMITS.batchTokensPerContract} token ids per contract`))
    .refine((m) => Object.keys(m).length <= LIMITS.batchContracts, `at most ${LIMITS.batchContracts} contracts per batch`),
});

/** Made here, not in the handler, so a cached answer's check keeps nothing else of the request alive. */
function allCurrent(checks: Array<() => boolean>): () => boolean {
  return () => checks.every((c) => c());
}

/** `shares`: the process's shares of metadata reads, which the REST reads spend from too (read-shares.ts). */
export function metadataService(s: MetadataServiceDeps, shares: MetadataReadShares): ServiceDef {
  const E = metadataErrorMap;
  return {
    name: 'Metadata',
    schema: METADATA_SCHEMA,
    errors: E,
    defaultAuth: (name) => (s.config.auth.publicMethods.includes(name) ? 'optional' : s.config.auth.rpc),
    // Reads run in their caller's share of the key, weighed by what they ask (read-shares.ts).
    methods: shares.wrap({
      Ping: method({ input: NoArgs, handler: async () => ({ status: true }) }),
      Version: method({
        input: NoArgs,
        handler: async () => ({ version: versionInfo('v0.4.0', '673a5fa528008c7f9558810fbb24aad978ed7a84') }),
      }),
      RuntimeStatus: method({ input: NoArgs, handler: async (_a, ctx) => ({ status: await runtimeStatus(s, seesDetail(ctx)) }) }),

      GetTokenMetadata: method({
        input: GetTokenMetadataArgs,
        reusable: true,
        handler: async (a, ctx) => {
          const chain = chainFor(s, a.chainID, E);
          const r = await readTokens(s, chain, a.contractAddress, a.tokenIDs, fetchCallerOf(s, ctx.keyId, ctx.request.ip), E.rateLimited);
          const text = `{"tokenMetadata":[${r.json.join(',')}]}`;
          return r.reusableUntil ? new ReusableJson(text, r.reusableUntil, r.isCurrent, r.json.length) : new RawJson(text);
        },
      }),

      ...contractMethods(s),
      ...refreshMethods(s),
      ...legacySyncMethods(s),
      ...tokenSearchMethods(s),
      ...directoryMethods(s),

      GetTokenMetadataBatch: method({
        input: GetTokenMetadataBatchArgs,
        reusable: true,
        handler: async (a, ctx) => {
          const chain = chainFor(s, a.chainID, E);
          const caller = fetchCallerOf(s, ctx.keyId, ctx.request.ip);
          const entries = Object.entries(a.contractTokenMap).map(([addr, ids]) => {
            const parsed = AddressArg.safeParse(addr);
            if (!parsed.success) throw new RpcError(MetadataErrors.InvalidArgument, `contractTokenMap: key "${addr.slice(0, 60)}" is not a 20-byte 0x address`);
            return [parsed.data, ids] as const;
          });
          // Contracts resolve concurrently; each shares one deadline for unknown tokens.
          const results = await Promise.all(entries.map(([addr, ids]) => readTokens(s, chain, addr, ids, caller, E.rateLimited)));
          // Keys that differ only in case name one contract: their lists are joined.
          const byContract = new Map<string, string[]>();
          entries.forEach(([addr], i) => byContract.set(addr, [...(byContract.get(addr) ?? []), ...results[i].json]));
          const body = [...byContract].map(([addr, parts]) => `${JSON.stringify(addr)}:[${parts.join(',')}]`).join(',');
          const text = `{"contractTokenMetadata":{${body}}}`;
          // Reusable only while every contract's part is.
          const until = results.reduce((u, r) => Math.min(u, r.reusableUntil), results.length ? Infinity : 0);
          if (!until || until === Infinity) return new RawJson(text);
          const tokens = results.reduce((n, r) => n + r.json.length, 0);
          return new ReusableJson(text, until, allCurrent(results.map((r) => r.isCurrent)), tokens);
        },
      }),
    }),
  };
}
