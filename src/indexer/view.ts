import type { ChainClient } from '../chain/client.ts';
import type { BalanceRow } from './balance-reader.ts';
import type { IndexerMetadata } from './chain-indexer.ts';
import type { HistoryTxn } from './history-reader.ts';

// The wire shapes of @0xsequence/indexer (indexer.gen.ts): TokenBalance, TokenSupply, Transaction.
// Prices are not tracked: their fields are "0" as the schema requires them.

/** Contract info and token metadata for a set of (contract, token id) pairs, one lookup per contract. */
export interface MetadataPage {
  contracts: Map<string, unknown>;
  tokens: Map<string, unknown>;
}

const NFT = new Set(['ERC721', 'ERC1155']);

export async function metadataFor(
  meta: IndexerMetadata,
  chain: ChainClient,
  items: Array<{ contract: string; type: string; tokenIds: string[] }>,
  opts: { tokens: boolean },
): Promise<MetadataPage> {
  const contracts = [...new Set(items.map((i) => i.contract))];
  const ids = new Map<string, Set<string>>();
  if (opts.tokens) {
    for (const i of items) {
      if (!NFT.has(i.type)) continue;
      const set = ids.get(i.contract) ?? new Set<string>();
      for (const id of i.tokenIds) set.add(id);
      ids.set(i.contract, set);
    }
  }
  const [infos, ...perContract] = await Promise.all([
    contracts.length ? meta.contracts(chain, contracts) : Promise.resolve(new Map<string, unknown>()),
    ...[...ids].map(async ([c, set]) => {
      const list = [...set];
      const tokens = await meta.tokens(chain, c, list);
      return list.map((id, k) => [`${c}:${id}`, tokens[k]] as const);
    }),
  ]);
  return { contracts: infos as Map<string, unknown>, tokens: new Map(perContract.flat()) };
}

export function tokenBalanceWire(chainId: number, r: BalanceRow, meta?: MetadataPage, summary?: { unique: number }) {
  const token = meta && !summary ? meta.tokens.get(`${r.contract}:${r.tokenId}`) : undefined;
  const info = meta?.contracts.get(r.contract);
  return {
    contractType: r.type,
    contractAddress: r.contract,
    accountAddress: r.account,
    tokenID: r.tokenId,
    balance: r.balance,
    balanceUSD: '0',
    priceUSD: '0',
    blockHash: r.blockHash,
    blockNumber: r.blockNumber,
    chainId,
    uniqueCollectibles: summary && r.type !== 'ERC20' ? String(summary.unique) : '0',
    isSummary: summary !== undefined,
    ...(info ? { contractInfo: info } : {}),
    ...(token ? { tokenMetadata: token } : {}),
  };
}

export function tokenSupplyWire(chainId: number, contract: string, s: { tokenId: string; supply: string; type: string }, meta?: MetadataPage) {
  const info = meta?.contracts.get(contract);
  const token = meta?.tokens.get(`${contract}:${s.tokenId}`);
  return { tokenID: s.tokenId, supply: s.supply, chainId, ...(info ? { contractInfo: info } : {}), ...(token ? { tokenMetadata: token } : {}) };
}

/** A transaction with its transfers; SEND or RECEIVE as seen from `accounts` (UNKNOWN without one, or for a self-transfer). */
export function transactionWire(chainId: number, t: HistoryTxn, accounts: Set<string>, meta?: MetadataPage) {
  return {
    txnHash: t.txHash,
    blockNumber: t.blockNumber,
    blockHash: t.blockHash,
    chainId,
    timestamp: t.ts.toISOString(),
    transfers: t.transfers.map((tr) => {
      const sends = accounts.has(tr.from);
      const receives = accounts.has(tr.to);
      const info = meta?.contracts.get(tr.contract);
      const tokens: Record<string, unknown> = {};
      if (meta) for (const id of tr.tokenIds) {
        const m = meta.tokens.get(`${tr.contract}:${id}`);
        if (m) tokens[id] = m;
      }
      return {
        transferType: sends === receives ? 'UNKNOWN' : sends ? 'SEND' : 'RECEIVE',
        contractAddress: tr.contract,
        contractType: tr.type,
        from: tr.from,
        to: tr.to,
        tokenIds: tr.tokenIds,
        amounts: tr.amounts,
        logIndex: tr.logIndex,
        ...(info ? { contractInfo: info } : {}),
        ...(Object.keys(tokens).length ? { tokenMetadata: tokens } : {}),
      };
    }),
  };
}
