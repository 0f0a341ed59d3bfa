import { formatTransactionReceipt, type RpcTransactionReceipt, type TransactionReceipt } from 'viem';
import { z } from 'zod';
import type { StoredEvent } from '../../events/outbox.ts';
import { eventTopic, receiptMatches, receiptWire, type ChainIndexer, type ReceiptFilter } from '../../indexer/index.ts';
import { RpcError, indexerErrorMap as E } from '../errors.ts';
import type { StreamDeps } from '../webrpc-stream.ts';
import { serveWebrpcStream } from '../webrpc-stream.ts';
import { method, type MethodDef, type RpcContext } from '../webrpc.ts';
import { AddressArg } from './args.ts';
import { ReceiptFilterArg } from './indexer-args.ts';

/** Statuses whose `metatxn.status` event carries a mined receipt. */
const MINED = new Set(['SUCCEEDED', 'PARTIALLY_FAILED', 'FAILED']);
/** How many receipt hashes a stream remembers, so a transaction carrying several meta-transactions is sent once. */
const SEEN = 1_000;

interface StatusData {
  status?: string;
  cause?: string | null;
  receipt?: { txnReceipt?: string };
}

/** The chain receipt a `metatxn.status` event carries once mined; null for other statuses, and for a reorged one. */
function minedReceipt(e: StoredEvent): TransactionReceipt | null {
  const d = e.data as StatusData;
  if (e.type !== 'metatxn.status' || !MINED.has(d.status ?? '') || !d.receipt?.txnReceipt) return null;
  try {
    const raw = JSON.parse(d.receipt.txnReceipt) as RpcTransactionReceipt | null;
    return raw?.transactionHash ? formatTransactionReceipt(raw) : null;
  } catch {
    return null;
  }
}

/** A mined hash once per stream: every meta-transaction of one transaction has its own event. */
function firstTime() {
  const seen = new Set<string>();
  return (hash: string) => {
    if (seen.has(hash)) return false;
    seen.add(hash);
    if (seen.size > SEEN) seen.delete(seen.values().next().value!);
    return true;
  };
}

const EventFilterArg = z.object({
  events: z.array(z.string().max(500)).max(50).optional(),
  contractAddresses: z.array(AddressArg).max(200).optional(),
  accounts: z.array(z.string()).optional(),
  tokenIDs: z.array(z.string()).optional(),
});

/**
 * SubscribeReceipts, SubscribeEvents and SubscribeBalanceUpdates: webrpc streams fed by the outbox
 * (the source `GET /events` reads), so what they carry is what metarelay records as it happens —
 * receipts and logs of the transactions its relayer mines, and the balances its indexer changes on
 * watched contracts. Not every transaction of the chain: docs/api.md says so.
 */
export function indexerStreamMethods(chainOf: (ctx: RpcContext) => ChainIndexer, deps: StreamDeps): Record<string, MethodDef<z.ZodType>> {
  const open = (ctx: RpcContext, types: string[], frames: (e: StoredEvent) => unknown[]) => {
    const ix = chainOf(ctx);
    // A caller without a project (a method open to anyone) sees the deployment's events only: -1 is no project's id.
    return serveWebrpcStream(ctx, deps, { projectId: ctx.project?.id ?? -1, types, chainIds: [ix.chain.chainId] }, frames);
  };
  return {
    SubscribeReceipts: method({
      input: z.object({ filter: ReceiptFilterArg }),
      handler: async (a, ctx) => {
        const confirmations = chainOf(ctx).cfg.confirmations;
        const fresh = firstTime();
        return open(ctx, ['metatxn.status'], (e) => {
          const r = minedReceipt(e);
          if (!r || !receiptMatches(r, a.filter as ReceiptFilter) || !fresh(r.transactionHash)) return [];
          // Sent as it is mined: `final` says whether it already has the indexer's confirmations.
          return [{ receipt: receiptWire(r, r.blockNumber, confirmations) }];
        });
      },
    }),

    SubscribeEvents: method({
      input: z.object({ filter: EventFilterArg.optional() }),
      handler: async (a, ctx) => {
        const f = a.filter ?? {};
        // Logs come from relayed receipts, undecoded: which account or token id a log is about is not known here.
        if (f.accounts?.length || f.tokenIDs?.length) {
          throw new RpcError(
            E.invalidArgument,
            'filter.accounts and filter.tokenIDs cannot be honoured: the logs streamed are not decoded; filter by events and contractAddresses, or use SubscribeBalanceUpdates',
          );
        }
        const topics = (f.events ?? []).map((ev) => {
          const t = eventTopic(ev);
          if (!t) throw new RpcError(E.invalidArgument, `filter.events: "${ev}" must be a 32-byte topic (0x…) or an event signature such as Transfer(address,address,uint256)`);
          return t;
        });
        const contracts: string[] = f.contractAddresses ?? [];
        const fresh = firstTime();
        return open(ctx, ['metatxn.status'], (e) => {
          const r = minedReceipt(e);
          if (!r || !fresh(r.transactionHash)) return [];
          return r.logs
            .filter((l) => (!contracts.length || contracts.includes(l.address.toLowerCase())) && (!topics.length || topics.includes((l.topics[0] ?? '0x').toLowerCase() as `0x${string}`)))
            .map((l) => ({
              log: {
                id: e.id,
                uid: `${r.transactionHash}:${l.logIndex}`,
                type: 'BLOCK_ADDED',
                blockNumber: Number(r.blockNumber),
                blockHash: r.blockHash,
                parentBlockHash: '',
                contractAddress: l.address.toLowerCase(),
                contractType: 'UNKNOWN',
                txnHash: r.transactionHash,
                txnIndex: r.transactionIndex,
                txnLogIndex: l.logIndex,
                logDataType: 'EVENT',
                ts: e.createdAt.toISOString(),
                rawLog: { address: l.address.toLowerCase(), topics: l.topics, data: l.data },
              },
            }));
        });
      },
    }),

    SubscribeBalanceUpdates: method({
      input: z.object({ contractAddress: AddressArg }),
      handler: async (a, ctx) => {
        const chainId = chainOf(ctx).chain.chainId;
        return open(ctx, ['balance.updated'], (e) => {
          const d = e.data as BalanceData;
          if (d.contractAddress !== a.contractAddress) return [];
          return d.balances.map((b) => ({
            balance: {
              contractType: d.contractType,
              contractAddress: d.contractAddress,
              accountAddress: b.accountAddress,
              tokenID: b.tokenID,
              balance: b.balance,
              balanceUSD: '0',
              priceUSD: '0',
              blockHash: d.blockHash,
              blockNumber: b.blockNumber,
              chainId,
              uniqueCollectibles: '0',
              isSummary: false,
            },
          }));
        });
      },
    }),
  };
}

/** `balance.updated` data (events/balance-events.ts). */
interface BalanceData {
  contractAddress: string;
  contractType: string;
  blockHash: string;
  balances: Array<{ accountAddress: string; tokenID: string; balance: string; blockNumber: number }>;
}
