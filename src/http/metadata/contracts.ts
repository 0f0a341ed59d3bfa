import type { Address } from 'viem';
import { z } from 'zod';
import type { ChainClient } from '../../chain/client.ts';
import { contractToWire, type ContractInfoWire } from '../../metadata/contracts/contract-view.ts';
import type { Services } from '../../services.ts';
import { metadataErrorMap as E } from '../core/errors.ts';
import { method, type MethodDef, type RpcContext } from '../core/webrpc.ts';
import { AddressArg, ChainArg, PageArg, chainFor, chainIdsFor, type ChainArgDeps, type ChainIdDeps } from '../core/args.ts';
import { nextPage } from '../core/page.ts';

/** What the contract reads use: the contract service and store, and the chain arguments' lookup. */
export type ContractReadDeps = ChainArgDeps & ChainIdDeps & Pick<Services, 'contracts' | 'contractStore'>;

/** Documented limit of GetContractInfoBatch / FindContractInfoBatch. */
export const CONTRACT_BATCH_LIMIT = 100;

const ContractTypes = z.enum(['UNKNOWN', 'ERC20', 'ERC721', 'ERC1155', 'ERC6909', 'MISC']);
const ADDRESS_RE = /^0x[0-9a-fA-F]{40}$/;

const SearchArgs = z.object({
  q: z.string().trim().min(1, 'q must not be empty').max(200),
  chainID: ChainArg.optional(),
  chainIDs: z.array(ChainArg).max(50).optional(),
  types: z.array(ContractTypes).optional(),
  page: PageArg,
});

const allowedOf = (ctx: RpcContext) => ctx.project?.allowedChainIds ?? null;
/** A caller with an access key (or the operator): its reads queue the logos not stored yet; a keyless one's never do. */
const keyed = (ctx: RpcContext) => ctx.keyId !== null || ctx.admin;

/** The contract on every configured chain where it exists (deployed, or known to a token list). */
async function findEverywhere(s: ContractReadDeps, addresses: Address[], allowed: number[] | null, eager: boolean): Promise<Map<string, ContractInfoWire[]>> {
  // A project held to some networks sees only those: "everywhere" is everywhere it may look.
  const mayLook = (chainId: number) => !allowed || allowed.includes(chainId);
  const chains = [...s.chains.values()].filter((c) => mayLook(c.chainId));
  const perChain = await Promise.all(chains.map((c) => s.contracts.get(c, addresses, { eager })));
  const out = new Map<string, ContractInfoWire[]>(addresses.map((a) => [a, []]));
  perChain.forEach(({ infos }) => {
    for (const [a, info] of infos) if (info.deployed || info.name) out.get(a)!.push(info);
  });
  // Chains this server has no RPC for still answer from what token lists taught it.
  for (const row of await s.contractStore.findByAddress(addresses)) {
    if (!s.chains.has(row.chain_id) && mayLook(row.chain_id)) out.get(row.address)?.push(contractToWire(row.chain_id, row.address, row, 'AVAILABLE', null, s.contracts.mediaUrl));
  }
  return out;
}

async function search(s: ContractReadDeps, a: z.infer<typeof SearchArgs>, allowed: number[] | null, eager: boolean) {
  const page = a.page?.page ?? 0;
  const pageSize = a.page?.pageSize ?? 20;
  const chainInputs = [...(a.chainID ? [a.chainID] : []), ...(a.chainIDs ?? [])];
  // Named networks outside a project's allowed ones were refused before this; no filter means its own.
  const chainIds = chainInputs.length ? chainIdsFor(s, chainInputs, E) : allowed;
  if (ADDRESS_RE.test(a.q)) {
    const address = a.q.toLowerCase() as Address;
    const wanted = (chainId: number) => !chainIds || chainIds.includes(chainId);
    const chains: ChainClient[] = [...s.chains.values()].filter((c) => wanted(c.chainId));
    const found = await Promise.all(chains.map(async (c) => (await s.contracts.get(c, [address], { eager })).infos.get(address)!));
    // Chains this server has no RPC for answer from what token lists and overrides taught it,
    // as FindContractInfo does: the address search finds what the name search finds.
    const stored = (await s.contractStore.findByAddress([address]))
      .filter((r) => wanted(r.chain_id) && !s.chains.has(r.chain_id))
      .map((r) => contractToWire(r.chain_id, r.address, r, 'AVAILABLE', null, s.contracts.mediaUrl));
    const hits = [...found, ...stored].filter((i) => (i.deployed || i.name) && (!a.types || a.types.includes(i.type as never))).sort((x, y) => x.chainId - y.chainId);
    return { contractInfo: page === 0 ? hits : [], nextPage: nextPage({ page, pageSize }, false) };
  }
  const { rows, more } = await s.contractStore.search({ q: a.q, chainIds, types: a.types ?? null, page, pageSize });
  return {
    contractInfo: rows.map((r) => contractToWire(r.chain_id, r.address, r, 'AVAILABLE', null, s.contracts.mediaUrl)),
    nextPage: nextPage({ page, pageSize }, more),
  };
}

export function contractMethods(s: ContractReadDeps): Record<string, MethodDef<any>> {
  const findOne = method({
    input: z.object({ contractAddress: AddressArg }),
    handler: async (a, ctx) => ({ contractInfoList: (await findEverywhere(s, [a.contractAddress], allowedOf(ctx), keyed(ctx))).get(a.contractAddress) }),
  });
  const findBatch = method({
    input: z.object({ contractAddresses: z.array(AddressArg).min(1).max(CONTRACT_BATCH_LIMIT, `at most ${CONTRACT_BATCH_LIMIT} contractAddresses per call`) }),
    handler: async (a, ctx) => ({ contractInfoByChain: Object.fromEntries(await findEverywhere(s, a.contractAddresses, allowedOf(ctx), keyed(ctx))) }),
  });
  const searchMethod = method({ input: SearchArgs, handler: (a, ctx) => search(s, a, allowedOf(ctx), keyed(ctx)) });
  return {
    GetContractInfo: method({
      input: z.object({ chainID: ChainArg, contractAddress: AddressArg }),
      handler: async (a, ctx) => {
        const { infos } = await s.contracts.get(chainFor(s, a.chainID, E), [a.contractAddress], { eager: keyed(ctx) });
        return { contractInfo: infos.get(a.contractAddress) };
      },
    }),
    GetContractInfoBatch: method({
      input: z.object({
        chainID: ChainArg,
        contractAddresses: z.array(AddressArg).max(CONTRACT_BATCH_LIMIT, `at most ${CONTRACT_BATCH_LIMIT} contractAddresses per call`),
      }),
      handler: async (a, ctx) => {
        const { infos } = await s.contracts.get(chainFor(s, a.chainID, E), a.contractAddresses, { eager: keyed(ctx) });
        return { contractInfoMap: Object.fromEntries(infos) };
      },
    }),
    FindContractInfo: findOne,
    FindContractInfoBatch: findBatch,
    // Deprecated names that older clients still call.
    SearchContractInfo: findOne,
    SearchContractInfoBatch: findBatch,
    SearchContractsByQuery: searchMethod,
    SearchContracts: searchMethod,
  };
}
