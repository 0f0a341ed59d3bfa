import { MetadataErrors, type MethodDef, NoArgs, RpcError, clientAddress, method } from '../../http/index.ts';
import { z } from 'zod';
import { RelayError, feeTokenWire, relayerHealth, switchSender, type HealthDeps } from '../../relayer/index.ts';
import { chainIdArg, type ConsoleArgDeps } from '../args.ts';
import type { ConsoleDeps } from '../deps.ts';
import type { Services } from '../../services.ts';

/** What the network methods use: the chains, the relayers and their health (db, metaTxns, bars), the balances, the config and the database. */
export type NetworkServices = ConsoleArgDeps & HealthDeps & Pick<Services, 'balances' | 'chains' | 'config' | 'db' | 'fleet' | 'relayers'>;

const SenderSwitch = z.object({ chainID: z.string().min(1), index: z.number().int().nonnegative() });

/** The relayer's own refusals, in the console's error table. */
async function relayerCall<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof RelayError) throw new RpcError(MetadataErrors.InvalidArgument, err.message);
    throw err;
  }
}

const message = (err: unknown) => (err instanceof Error ? err.message.split('\n')[0] : String(err));

/** Fee tokens and their live prices, and the health of each network. */
export function networkMethods({ s }: ConsoleDeps<NetworkServices>): Record<string, MethodDef<any>> {
  const relayerOf = (chainID: string) => {
    const chainId = chainIdArg(s, chainID);
    const r = s.relayers.get(chainId);
    if (!r) throw new RpcError(MetadataErrors.ChainNotFound, `no relayer runs on chain ${chainID}`);
    return r;
  };
  return {
    /** The configured networks, for the page's pickers. */
    ListNetworks: method({
      input: NoArgs,
      // The native symbol and the native/USD rate now let the page show amounts in native units and dollars (the exact wei on hover).
      handler: async () => ({
        networks: await Promise.all(
          s.networks.list().map(async (c) => ({
            chainId: c.chainId,
            name: c.name,
            relayer: s.relayers.has(c.chainId),
            symbol: s.chains.get(c.chainId)?.public.chain?.nativeCurrency.symbol ?? 'ETH',
            usdRate: s.relayers.has(c.chainId) ? await s.balances.usdRate(c.chainId).catch(() => null) : null,
          })),
        ),
      }),
    }),
    FeeTokens: method({
      input: NoArgs,
      handler: async () => ({
        networks: await Promise.all(
          [...s.relayers.values()].map(async (r) => {
            // The live price (null when the token has none now and is withdrawn), with where it came from.
            const prices = await r.priceStatus().catch(() => null);
            return {
              chainId: r.chainId,
              network: r.network,
              isFeeRequired: r.isFeeRequired,
              paymentAddress: r.paymentAddress,
              feeMarkup: r.feeMarkup,
              tokens: r.feeTokens.map((t, i) => {
                const p = prices?.[i];
                return {
                  ...feeTokenWire(r.chainId, t),
                  nativePrice: p?.ok ? p.nativePrice : null,
                  fixedPrice: t.nativePrice ?? null,
                  priceSource: p?.ok ? p.source : null,
                  priceError: p ? (p.ok ? null : p.reason) : 'the price read failed',
                };
              }),
            };
          }),
        ),
      }),
    }),
    /** Takes a sender out of rotation (it settles what it has open) or puts it back. */
    StopSender: method({ input: SenderSwitch, handler: async (a) => (await relayerCall(() => switchSender(s.db, relayerOf(a.chainID), a.index, false)), {}) }),
    StartSender: method({ input: SenderSwitch, handler: async (a) => (await relayerCall(() => switchSender(s.db, relayerOf(a.chainID), a.index, true)), {}) }),
    /** Lets a barred wallet, key or client address have fee-paid meta-transactions relayed again. */
    LiftRelayBar: method({
      input: z.object({ kind: z.enum(['wallet', 'key', 'ip', 'contract', 'key-client', 'key-wallet']), value: z.string().min(1).max(200) }),
      handler: async (a) => {
        // An IPv6 client is barred as its network (clientIpv6Prefix): any address in it, or the network, lifts it.
        const value = a.kind === 'ip' ? clientAddress(a.value, s.config.clientIpv6Prefix) : a.value;
        if (!(await s.bars.lift(a.kind, value))) throw new RpcError(MetadataErrors.NotFound, `no bar on ${a.kind} ${value}`);
        return {};
      },
    }),
    /**
     * Per network: the chain head, and where a relayer runs, its senders and its queue. While a node is
     * down the network still shows what was last known (head and when it was seen, each sender's last
     * read balance, the queue from the database), with when the outage began and its cause. And the
     * API processes this one counts on the database, which share every in-memory rate (util/fleet-share.ts).
     */
    Health: method({
      input: NoArgs,
      handler: async () => {
        const networks = await Promise.all(
          [...s.chains.values()].map(async (chain) => {
            const relayer = s.relayers.get(chain.chainId);
            let head: { number: number; hash: string | null; timestamp: string | null; seenAt: string | null } | null = null;
            let error: string | null = null;
            try {
              // The shared head tells the chain's health itself.
              const b = await chain.head.read();
              head = { number: Number(b.number), hash: b.hash, timestamp: new Date(Number(b.timestamp) * 1000).toISOString(), seenAt: new Date().toISOString() };
            } catch (err) {
              error = message(err);
            }
            const st = chain.health.state();
            // The last head any node call saw (the readiness probe, this page), kept through the outage.
            if (!head && st.head !== null) head = { number: st.head, hash: null, timestamp: null, seenAt: st.headAt };
            return {
              chainId: chain.chainId,
              network: chain.name,
              ok: error === null && st.ok,
              // The transport's own words when the chain's health has them (refused, timed out, HTTP 429), not viem's "HTTP request failed."
              error: error === null ? null : (st.cause ?? error),
              downSince: st.downSince,
              rateLimited: st.rateLimited,
              head,
              relayer: relayer ? await relayerHealth(s, relayer) : null,
            };
          }),
        );
        return { networks, fleet: { apiProcesses: s.fleet.size } };
      },
    }),
  };
}
