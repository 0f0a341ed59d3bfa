import type { Address, PublicClient } from 'viem';
import type { ChainClient } from '../chain/client.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import type { BarRepo } from './bars.ts';
import type { SequenceContext } from './context.ts';
import type { RelayerChainConfig } from './config.ts';
import type { FeeModelName } from './fee-model.ts';
import type { BalanceHolds } from './balances/holds.ts';
import type { SponsorApprover } from './intake/approval.ts';
import type { Authorization } from './intake/authorization.ts';
import type { DecodedCall } from './intake/bundle.ts';
import type { RunAs } from './intake/run-as.ts';
import type { FeeTokenConfig, PriceSource } from './intake/fees.ts';
import type { ProbeJob, ProbeResult } from './intake/simulate.ts';
import type { SponsorRepo } from './intake/sponsors.ts';
import type { SpendCaps } from './intake/spend-caps.ts';
import type { WalletCache, WalletKind } from './intake/wallets.ts';
import type { WaitRepo } from './preconditions/store.ts';
import type { MetaTxnRepo } from './store.ts';

/*
 * What the relayer's stages are given: the per-chain context (ChainRelayer implements RelayerChain) and
 * the dependencies wired in createServices. Intake (intake/intake.ts) and pricing (intake/pricing.ts)
 * take them in their constructors rather than reaching into ChainRelayer, so neither imports it.
 */

export interface RelayerDeps {
  chain: ChainClient;
  config: RelayerChainConfig;
  /** How the chain charges the sender (fee-model.ts); default: by chain id. */
  feeModel?: FeeModelName;
  quoteSecret: string;
  metaTxns: MetaTxnRepo;
  sponsors: SponsorRepo;
  /** Callers barred from fee-paid relaying after a fee did not arrive; without it, nobody is. */
  bars?: BarRepo;
  /** Budgets of sponsorship rules (daily, per wallet, total); without it, rules have none. */
  spendCaps?: SpendCaps;
  /** Project balances: a project whose limited gas tank cannot cover a bundle does not sponsor it; without it, none is limited. */
  balances?: BalanceHolds;
  log: Logger;
  /** Fee-token prices; default: a PriceBook over the configured sources (live feeds and pools, then fixed rates). */
  prices?: PriceSource;
  metrics?: Metrics;
  /** Wakes the dispatcher when work arrives. */
  onQueued?: () => void;
  /** Asks a rule's approval webhook (GasSponsor.webhookUrl); without it, such a rule never sponsors. */
  approveSponsorship?: SponsorApprover;
  /** Where meta-transactions waiting on preconditions keep them; without it, preconditions are refused. */
  waits?: WaitRepo;
}

/** What intake (intake/intake.ts) is given of the wiring, besides the chain context and pricing. */
export type IntakeDeps = Pick<RelayerDeps, 'config' | 'metaTxns' | 'bars' | 'spendCaps' | 'approveSponsorship' | 'waits' | 'metrics' | 'onQueued'>;

/** What pricing (intake/pricing.ts) is given of the wiring, besides the chain context. */
export type PricingDeps = Pick<RelayerDeps, 'config' | 'quoteSecret' | 'metaTxns' | 'sponsors' | 'bars' | 'spendCaps' | 'balances' | 'approveSponsorship'>;

/** The per-chain context the stages use: addresses, fee tokens, the node, simulations and wallet recognition. */
export interface RelayerChain {
  readonly chainId: number;
  /** The network's name (errors, metrics labels). */
  readonly network: string;
  readonly context: SequenceContext;
  readonly senders: Address[];
  readonly paymentAddress: Address;
  readonly feeTokens: readonly FeeTokenConfig[];
  readonly prices: PriceSource;
  readonly wallets: WalletCache;
  readonly client: PublicClient;
  readonly isFeeRequired: boolean;
  readonly feeModel: FeeModelName;
  payee(): Address;
  gasPriceNow(): Promise<bigint>;
  /** How simulations run like the mined transaction now (intake/run-as.ts). */
  runAs(): Promise<RunAs>;
  /** A block seen (a head, a receipt's block): reads that follow are pinned to at least it. */
  observeBlock(block: bigint | number): void;
  /**
   * The most the chain's L1 data fee can add to a transaction carrying `input` as calldata, in wei now
   * (OP stack: the GasPriceOracle's upper bound, read once per block and size); 0 on other chains.
   */
  l1FeeBound(input: string, withAuthorization?: boolean): Promise<bigint>;
  /** The L1 component of a transaction carrying `input`, in gas (Arbitrum: from the node's estimate); 0 on other chains. */
  l1Gas(input: string): Promise<bigint>;
  probe(job: ProbeJob): Promise<ProbeResult>;
  gasCap(anonymous: boolean): bigint;
  simulationGasCap(projectId: number | null): bigint;
  /** The client a caller's FeeOptions and Simulate simulations run on (keyless callers' apart). */
  simulationClient(anonymous: boolean): PublicClient;
  nextAfterQueued(wallet: Address, space: bigint, onChain: bigint): Promise<bigint>;
  decode(walletAddress: string, contract: string, input: string, isWallet?: (a: Address) => boolean): DecodedCall;
  checkDelegationShape(auth: Authorization, wallet: string, call: DecodedCall): Promise<void>;
  recognise(
    walletAddress: string,
    contract: string,
    input: string,
    strict: boolean,
    auth?: Authorization | null,
    decoded?: DecodedCall,
    deferSlot?: boolean,
  ): Promise<{ call: DecodedCall; kinds: Map<Address, WalletKind>; unverified: Address[] }>;
}
