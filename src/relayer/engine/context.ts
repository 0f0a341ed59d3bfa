import type { Address, PublicClient } from 'viem';
import type { ChainClient } from '../../chain/client.ts';
import type { ChainHead } from '../../chain/head.ts';
import type { Db, Queryable } from '../../store/db.ts';
import type { Logger } from '../../telemetry/logger.ts';
import type { Metrics } from '../../telemetry/metrics.ts';
import type { BarRepo } from '../bars.ts';
import type { RelayerChain } from '../chain-view.ts';
import type { RelayerChainConfig } from '../config.ts';
import type { RelayEvents } from '../events.ts';
import type { MetaTxnRepo, MetaTxnRow } from '../store.ts';
import type { BalanceHook } from './balance-level.ts';
import type { FeePolicy } from './gas-price.ts';
import type { SenderAccount } from './sender-pool.ts';

/*
 * What the engine's stages are given: the Dispatcher (which sends) and the Sweeper (which settles) both
 * work from this context, explicitly; the Sweeper never reads or writes the Dispatcher's own state, it
 * returns what it learnt of each sender (SenderState) and whether to look again before the next block.
 */

export interface DispatcherDeps {
  /** The chain the engine reads and broadcasts on (its own client: chain/client.ts NodeRole 'engine'), its name, head and health. */
  chain: ChainClient;
  config: RelayerChainConfig;
  db: Db;
  metaTxns: MetaTxnRepo;
  bars?: BarRepo;
  events: RelayEvents;
  log: Logger;
  metrics?: Metrics;
  /** Runs every tick with the current head, before ready work is sent (the preconditions checker; it decides what is due); true: meta-transactions wait on the next heads. */
  onHead?: (head: number) => Promise<unknown>;
  /** Tops senders below their floor up from a treasury (engine/refill.ts); without it, none is. */
  refill?: { check(senders: { address: Address; balance: bigint }[]): Promise<void> };
  /** Called once per crossing of a sender's balance level, on the transaction that records it (balance-level.ts). */
  onSenderBalance?: BalanceHook;
}

/** What the sweep knows of a sender after reading the chain at the current head. */
export interface SenderState {
  latest: number;
  pending: number;
  balance: bigint;
  belowFloor: boolean;
  /** Slots signed and not mined yet (what maxInFlightPerSender bounds). */
  open: number;
  /**
   * A slot of it cannot be mined in the next block (its last attempt's max fee under the next base fee) or
   * cannot be replaced (its cover's ceiling under the market, the fee cap, a refused replacement): every
   * later nonce of the sender would wait behind it, so it takes no new work (engine/unblock.ts).
   */
  stalled: boolean;
}

/** The chain, the senders' keys, the fee policy and the stores an engine stage works with. */
export interface EngineContext {
  readonly chainId: number;
  readonly chainName: string;
  readonly client: PublicClient;
  /** The chain's head and recent headers, shared with the process's other readers (chain/head.ts). */
  readonly chainHead: ChainHead;
  readonly config: RelayerChainConfig;
  readonly relayer: Pick<RelayerChain, 'context' | 'paymentAddress' | 'feeTokens' | 'observeBlock' | 'feeModel' | 'l1FeeBound'>;
  // The stores, log and hooks of the chain's engine (DispatcherDeps, from the wiring).
  readonly db: Db;
  readonly metaTxns: MetaTxnRepo;
  readonly bars?: BarRepo;
  readonly log: Logger;
  readonly metrics?: Metrics;
  readonly refill?: DispatcherDeps['refill'];
  readonly onSenderBalance?: BalanceHook;
  /** This process's lease owner id on relay_senders. */
  readonly owner: string;
  readonly policy: FeePolicy;
  readonly accounts: Map<Address, SenderAccount>;
  /** Tells the meta-transaction's listeners its status changed. */
  emit(id: string): void;
  requeueOrDrop(q: Queryable, row: MetaTxnRow, why: string): Promise<void>;
}
