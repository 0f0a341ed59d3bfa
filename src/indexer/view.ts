import type { ChainClient } from '../chain/client.ts';
import type { BalanceRow } from './balance-reader.ts';
import type { IndexerMetadata } from './chain-indexer.ts';
import type { HistoryTxn } from './history-reader.ts';

// The wire shapes of @0xsequence/indexer (indexer.gen.ts): TokenBalance, TokenSupply, Transaction,
// built as JSON text. Token metadata and contract info arrive already serialised from the metadata
// service and are spliced in as they are: a page of 1 000 tokens is not parsed and re-serialised.
// Prices come from the caller (the HTTP layer asks src/prices); a row without one keeps the schema's
// required "0" and has no priceUpdatedAt.

/** A balance's price fields: absent, the row is unpriced ("0", no priceUpdatedAt). */
export interface PriceFields {
  priceUSD: string;
  balanceUSD: string;
  priceUpdatedAt?: string;
  /** metarelay's own: why a token the operator prices has no price now (a stale or failing source). */
  priceUnavailable?: string;
  /** metarelay's own: where the price came from (docs/indexer.md#prices). */
  priceSource?: PriceSourceWire;
}

/** Where a USD price came from: the source's kind, the feed or pool read, and whether the built-in table named it. */
export interface PriceSourceWire {
  kind: 'chainlink' | 'uniswapV3' | 'fixed';
  address?: string;
  builtin: boolean;
}

/** Contract info and token metadata (JSON text) for a page, by contract and by `contract:id`. */
export interface MetadataPage {
  contracts: Map<string, string>;
  tokens: Map<string, string>;
}

const NFT = new Set(['ERC721', 'ERC1155']);

/** One lookup for the page's contracts and one per contract for its tokens (collectibles only). */
export async function metadataFor(meta: IndexerMetadata, chain: ChainClient, items: Array<{ contract: string; type: string; tokenIds: string[] }>, opts: { tokens: boolean }): Promise<MetadataPage> {
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
    contracts.length ? meta.contracts(chain, contracts) : Promise.resolve(new Map<string, string>()),
    ...[...ids].map(async ([c, set]) => {
      const list = [...set];
      const json = await meta.tokens(chain, c, list);
      return list.map((id, k) => [`${c}:${id}`, json[k]!] as const);
    }),
  ]);
  return { contracts: infos, tokens: new Map(perContract.flat()) };
}

/** `obj` serialised with extra members whose values are JSON text already. */
function spliced(obj: object, raw: Record<string, string | undefined>): string {
  const text = JSON.stringify(obj);
  const extra = Object.entries(raw)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${JSON.stringify(k)}:${v}`);
  return extra.length ? `${text.slice(0, -1)}${text.length > 2 ? ',' : ''}${extra.join(',')}}` : text;
}

export function tokenBalanceJson(chainId: number, r: BalanceRow, meta?: MetadataPage, summary?: { unique: number }, price?: PriceFields): string {
  return spliced(
    {
      contractType: r.type,
      contractAddress: r.contract,
      accountAddress: r.account,
      tokenID: r.tokenId,
      balance: r.balance,
      balanceUSD: price?.balanceUSD ?? '0',
      priceUSD: price?.priceUSD ?? '0',
      ...(price?.priceUpdatedAt ? { priceUpdatedAt: price.priceUpdatedAt } : {}),
      ...(price?.priceUnavailable ? { priceUnavailable: price.priceUnavailable } : {}),
      ...(price?.priceSource ? { priceSource: price.priceSource } : {}),
      blockHash: r.blockHash,
      blockNumber: r.blockNumber,
      chainId,
      uniqueCollectibles: summary && r.type !== 'ERC20' ? String(summary.unique) : '0',
      isSummary: summary !== undefined,
    },
    {
      contractInfo: meta?.contracts.get(r.contract),
      tokenMetadata: meta && !summary ? meta.tokens.get(`${r.contract}:${r.tokenId}`) : undefined,
    },
  );
}

export function tokenSupplyJson(chainId: number, contract: string, s: { tokenId: string; supply: string }, meta?: MetadataPage): string {
  return spliced({ tokenID: s.tokenId, supply: s.supply, chainId }, { contractInfo: meta?.contracts.get(contract), tokenMetadata: meta?.tokens.get(`${contract}:${s.tokenId}`) });
}

/** A transaction with its transfers; SEND or RECEIVE as seen from `accounts` (UNKNOWN without one, or for a self-transfer). */
export function transactionJson(chainId: number, t: HistoryTxn, accounts: Set<string>, meta?: MetadataPage, metaTxnID?: string): string {
  const transfers = t.transfers.map((tr) => {
    const sends = accounts.has(tr.from);
    const receives = accounts.has(tr.to);
    const tokens = meta
      ? tr.tokenIds.flatMap((id) => {
          const m = meta.tokens.get(`${tr.contract}:${id}`);
          return m ? [`${JSON.stringify(id)}:${m}`] : [];
        })
      : [];
    return spliced(
      {
        transferType: sends === receives ? 'UNKNOWN' : sends ? 'SEND' : 'RECEIVE',
        contractAddress: tr.contract,
        contractType: tr.type,
        from: tr.from,
        to: tr.to,
        tokenIds: tr.tokenIds,
        amounts: tr.amounts,
        logIndex: tr.logIndex,
      },
      { contractInfo: meta?.contracts.get(tr.contract), tokenMetadata: tokens.length ? `{${tokens.join(',')}}` : undefined },
    );
  });
  // metaTxnID: the relayed meta-transaction the transaction carried, when this service relayed it.
  return spliced(
    { txnHash: t.txHash, blockNumber: t.blockNumber, blockHash: t.blockHash, chainId, ...(metaTxnID ? { metaTxnID } : {}), timestamp: t.ts.toISOString() },
    { transfers: `[${transfers.join(',')}]` },
  );
}
