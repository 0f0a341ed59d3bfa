import { parseAbi, type Address } from 'viem';
import type { ChainClient } from '../../chain/client.ts';

const aggregatorAbi = parseAbi([
  'function latestRoundData() view returns (uint80 roundId, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound)',
  'function decimals() view returns (uint8)',
]);

/** How long a native/USD read is reused. Display only: the ledger keeps amounts in wei. */
const TTL_MS = 60_000;

/**
 * The native currency's USD price from the relayer's `nativeUsdFeed` (the Chainlink feed the fee
 * prices use), to show balances and ledger entries beside their USD value at the time. A stale,
 * incomplete or missing answer is no rate (null), never a guess.
 */
export class UsdRate {
  private last: { rate: number | null; at: number } | undefined;
  private pending?: Promise<number | null>;

  constructor(
    private readonly chain: ChainClient,
    private readonly feed: { feed: string; heartbeatSec: number } | undefined,
  ) {}

  /** The last rate read, without I/O; starts a read in the background when it is old. */
  current(): number | null {
    if (!this.last || Date.now() - this.last.at > TTL_MS) void this.read().catch(() => null);
    return this.last?.rate ?? null;
  }

  async read(): Promise<number | null> {
    if (!this.feed) return null;
    if (this.last && Date.now() - this.last.at <= TTL_MS) return this.last.rate;
    this.pending ??= this.fetch().finally(() => (this.pending = undefined));
    return this.pending;
  }

  private async fetch(): Promise<number | null> {
    const address = this.feed!.feed as Address;
    let rate: number | null = null;
    try {
      const [round, decimals] = await Promise.all([
        this.chain.public.readContract({ address, abi: aggregatorAbi, functionName: 'latestRoundData' }),
        this.chain.public.readContract({ address, abi: aggregatorAbi, functionName: 'decimals' }),
      ]);
      const [roundId, answer, , updatedAt, answeredInRound] = round;
      const age = Math.floor(Date.now() / 1000) - Number(updatedAt);
      const fresh = answer > 0n && updatedAt > 0n && answeredInRound >= roundId && age <= this.feed!.heartbeatSec;
      if (fresh) rate = Number(answer) / 10 ** decimals;
    } catch {
      rate = null;
    }
    this.last = { rate, at: Date.now() };
    return rate;
  }
}
