import type { Address } from 'viem';
import { z } from 'zod';
import { OverrideLayer } from '../../metadata/contracts/contract-merge.ts';
import type { ContractRow } from '../../metadata/contracts/contract-store.ts';
import type { Services } from '../../services.ts';
import { MetadataErrors, RpcError, metadataErrorMap as E } from '../core/errors.ts';
import { method, type ServiceDef } from '../core/webrpc.ts';
import { AddressArg, ChainArg, PageArg, chainIdsFor, type ChainIdDeps } from '../core/args.ts';
import { nextPage } from '../core/page.ts';
import { METADATA_SCHEMA } from './metadata.ts';
import { directoryAdminMethods, type DirectoryAdminDeps } from './directory.ts';

/** What the Admin service uses: the contract store and service (overrides), and the directory's admin methods'. */
export type AdminDeps = ChainIdDeps & DirectoryAdminDeps & Pick<Services, 'chains' | 'contractStore' | 'contracts'>;

/** Sequence ContractInfoOverride on the wire: name/type/symbol null when unset. */
function overrideToWire(o: OverrideLayer) {
  return {
    name: o.name ?? null,
    type: o.type ?? null,
    symbol: o.symbol ?? null,
    ...(o.decimals != null ? { decimals: o.decimals } : {}),
    ...(o.logoURI ? { logoURI: o.logoURI } : {}),
    extensions: o.extensions ?? {},
  };
}

const Target = { chainID: ChainArg, contractAddress: AddressArg };

/** Operators' admin API: contract overrides that beat every other source. Needs an admin token. */
export function adminService(s: AdminDeps): ServiceDef {
  const chainIdOf = (chainID: string) => {
    const found = s.networks.lookup(chainID);
    return found.ok ? found.chain.chainId : chainIdsFor(s, [chainID], E)[0];
  };
  const current = async (chainID: string, address: Address): Promise<ContractRow | undefined> => (await s.contractStore.getMany(chainIdOf(chainID), [address])).get(address);
  const write = async (chainID: string, address: Address, override: OverrideLayer | null) => {
    const chainId = chainIdOf(chainID);
    await s.contractStore.upsertLayers(chainId, [{ address, override }]);
    // A configured chain also gets its on-chain layer read, so the record is complete.
    const chain = s.chains.get(chainId);
    if (chain) s.contracts.learn(chain, [address]);
  };
  return {
    name: 'Admin',
    schema: METADATA_SCHEMA,
    errors: E,
    defaultAuth: () => 'admin',
    methods: {
      GetContractInfoOverride: method({
        input: z.object(Target),
        handler: async (a) => {
          const row = await current(a.chainID, a.contractAddress);
          if (!row?.override_layer) throw new RpcError(MetadataErrors.NotFound, 'no override for this contract');
          return { contractInfoOverride: overrideToWire(row.override_layer) };
        },
      }),
      GetContractInfoOverrides: method({
        input: z.object({ chainID: ChainArg.optional(), page: PageArg }),
        handler: async (a) => {
          const page = a.page?.page ?? 0;
          const pageSize = a.page?.pageSize ?? 20;
          const rows = await s.contractStore.listOverrides(a.chainID ? chainIdOf(a.chainID) : null, page, pageSize + 1);
          return {
            contractInfoOverrides: rows.slice(0, pageSize).map((r) => ({ chainId: r.chain_id, contractAddress: r.address, ...overrideToWire(r.override_layer!) })),
            page: nextPage({ page, pageSize }, rows.length > pageSize),
          };
        },
      }),
      AddContractInfoOverride: method({
        input: z.object({ ...Target, contractInfoOverride: OverrideLayer }),
        handler: async (a) => {
          if ((await current(a.chainID, a.contractAddress))?.override_layer) {
            throw new RpcError(MetadataErrors.RequestConflict, 'an override exists: use UpdateContractInfoOverride');
          }
          await write(a.chainID, a.contractAddress, a.contractInfoOverride);
          return { ok: true };
        },
      }),
      UpdateContractInfoOverride: method({
        input: z.object({ ...Target, contractInfoOverride: OverrideLayer }),
        handler: async (a) => {
          await write(a.chainID, a.contractAddress, a.contractInfoOverride);
          return { ok: true };
        },
      }),
      RemoveContractInfoOverride: method({
        input: z.object(Target),
        handler: async (a) => {
          if (!(await current(a.chainID, a.contractAddress))?.override_layer) throw new RpcError(MetadataErrors.NotFound, 'no override for this contract');
          await write(a.chainID, a.contractAddress, null);
          return { ok: true };
        },
      }),
      ...directoryAdminMethods(s),
    },
  };
}
