import { z } from 'zod';
import { eventTopic, logFrames, receiptFrames, tokenBalanceJson, type BalanceRow, type ChainIndexer, type PriceFields, type ReceiptFilter, type StreamLogFilter } from '../../indexer/index.ts';
import { RpcError, indexerErrorMap as E } from '../core/errors.ts';
import { serveWebrpcStream, type StreamDeps, type StreamFeed } from '../core/webrpc-stream.ts';
import { method, type MethodDef, type RpcContext } from '../core/webrpc.ts';
import { AddressArg, TokenIdArg } from '../core/args.ts';
import { ReceiptFilterArg } from './args.ts';

const EventFilterArg = z.object({
  events: z.array(z.string().max(500)).max(50).optional(),
  contractAddresses: z.array(AddressArg).max(200).optional(),
  accounts: z.array(AddressArg).max(200).optional(),
  tokenIDs: z.array(TokenIdArg).max(200).optional(),
});

/** USD price fields of balance rows, in row order (given by the wiring: the chain's configured prices). */
export type BalancePricing = (chainId: number, rows: readonly BalanceRow[]) => Promise<Array<PriceFields | undefined>>;

/** On a watchlist chain, a stream naming a contract the indexer does not read is refused, saying so (never left silent). */
async function indexedOnly(ix: ChainIndexer, field: string, contracts: readonly string[]): Promise<void> {
  if (ix.scope !== 'watchlist' || !contracts.length) return;
  const watched = new Set(await ix.watchlist.list());
  const missing = contracts.filter((c) => !watched.has(c));
  if (!missing.length) return;
  throw new RpcError(
    E.invalidArgument,
    `${field}: ${missing.slice(0, 3).join(', ')}${missing.length > 3 ? ` and ${missing.length - 3} more` : ''} ${missing.length > 1 ? 'are' : 'is'} not on ${ix.chain.name}'s watchlist, and the indexer reads only watched contracts there (scope: watchlist), so no stream can carry ${missing.length > 1 ? 'them' : 'it'}: add ${missing.length > 1 ? 'them' : 'it'} with Console/IndexerWatch or \`metarelay indexer watch\` first`,
  );
}

/**
 * SubscribeReceipts, SubscribeEvents and SubscribeBalanceUpdates: webrpc streams fed by what the indexer
 * reads from the chain (indexer/stream-tail.ts): every transaction of the blocks its cursor passes (on a
 * watchlist chain, those touching a watched contract), relayed or not, and the balances it changes, USD
 * valued where the chain prices the token. Frames come as the indexer passes a block, so `confirmations`
 * behind the head; a stream starts at the indexer's position when it opens (no resume).
 */
export function indexerStreamMethods(
  chainOf: (ctx: RpcContext) => ChainIndexer,
  deps: StreamDeps,
  /** `backlog`: balance batches one stream may have waiting for their prices (config indexer.streamPriceBacklog); past it, the stream ends. */
  pricing: { priced: BalancePricing; backlog: number },
): Record<string, MethodDef<z.ZodType>> {
  const open = (ctx: RpcContext, feed: StreamFeed) => serveWebrpcStream(ctx, deps, feed);
  return {
    SubscribeReceipts: method({
      input: z.object({ filter: ReceiptFilterArg }),
      handler: async (a, ctx) => {
        const ix = chainOf(ctx);
        const f = a.filter as ReceiptFilter;
        await indexedOnly(ix, 'filter.contractAddress', f.contractAddress ? [f.contractAddress] : []);
        const confirmations = ix.cfg.confirmations;
        return open(ctx, (send) =>
          ix.tail.subscribe({
            block(b) {
              const frames = receiptFrames(b, f, confirmations);
              if (frames.length) send(frames);
            },
            removed(b) {
              const frames = receiptFrames(b, f, confirmations, true);
              if (frames.length) send(frames);
            },
          }),
        );
      },
    }),

    SubscribeEvents: method({
      input: z.object({ filter: EventFilterArg.optional() }),
      handler: async (a, ctx) => {
        const ix = chainOf(ctx);
        const given = a.filter ?? {};
        const filter: StreamLogFilter = {
          events: new Set(
            (given.events ?? []).map((ev) => {
              const t = eventTopic(ev);
              if (!t) throw new RpcError(E.invalidArgument, `filter.events: "${ev}" must be a 32-byte topic (0x…) or an event signature such as Transfer(address,address,uint256)`);
              return t;
            }),
          ),
          contracts: new Set(given.contractAddresses ?? []),
          accounts: new Set(given.accounts ?? []),
          tokenIds: new Set(given.tokenIDs ?? []),
        };
        // As Sequence: a stream of every log of the chain is not offered.
        if (!filter.contracts.size && !filter.accounts.size) throw new RpcError(E.invalidArgument, 'filter: name contractAddresses or accounts (or both)');
        await indexedOnly(ix, 'filter.contractAddresses', [...filter.contracts]);
        return open(ctx, (send) =>
          ix.tail.subscribe({
            block(b) {
              const frames = logFrames(b, filter);
              if (frames.length) send(frames);
            },
            removed(b) {
              const frames = logFrames(b, filter, true);
              if (frames.length) send(frames);
            },
          }),
        );
      },
    }),

    SubscribeBalanceUpdates: method({
      input: z.object({ contractAddress: AddressArg }),
      handler: async (a, ctx) => {
        const ix = chainOf(ctx);
        await indexedOnly(ix, 'contractAddress', [a.contractAddress]);
        const chainId = ix.chain.chainId;
        return open(ctx, (send, end) => {
          // Priced in order, one batch after another; the tail never waits for a stream's prices.
          let queue = Promise.resolve();
          let waiting = 0;
          return ix.tail.subscribe({
            balances: {
              contract: a.contractAddress,
              changed(rows) {
                if (++waiting > pricing.backlog) return end(`this stream fell ${pricing.backlog} balance batches behind while pricing them: reconnect`);
                queue = queue.then(async () => {
                  const prices = await pricing.priced(chainId, rows).catch(() => rows.map(() => undefined));
                  waiting--;
                  send(rows.map((r, i) => `{"balance":${tokenBalanceJson(chainId, r, undefined, undefined, prices[i])}}`));
                });
              },
            },
          });
        });
      },
    }),
  };
}
