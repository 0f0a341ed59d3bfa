import { z } from 'zod';
import { Address, Decimal } from './fields.ts';
import { NativeUsdFeedSchema, PriceSourceSchema } from './price-schema.ts';

// The config of the relayer: a chain's relayer (senders, fees, queues, preconditions, loss budgets,
// replacement and finality) and the process-wide settings of relaying (quotes, anonymous callers' rates).

const PrivateKey = z.string().regex(/^0x[0-9a-fA-F]{64}$/, 'must be a 32-byte 0x private key');

export const FeeTokenConfigSchema = z
  .object({
    /** The ERC20 contract; null means the chain's native currency. */
    address: Address.nullable().default(null),
    name: z.string().min(1),
    symbol: z.string().min(1),
    decimals: z.number().int().min(0).max(36),
    logoURL: z.string().default(''),
    /**
     * What one whole token is worth in the native currency (a fixed rate; e.g. "0.0004" for a $1 token when ETH is $2 500).
     * With `prices`, the last fallback; without it, the only price. Omit it to have no fixed fallback.
     */
    nativePrice: Decimal.optional(),
    /** Live price sources, tried in order (docs/fee-prices.md); the fixed `nativePrice` after them. */
    prices: z.array(PriceSourceSchema).max(4).default([]),
  })
  .refine((t) => t.nativePrice !== undefined || t.prices.length > 0, { message: 'a fee token needs prices or a fixed nativePrice', path: ['nativePrice'] });

export const RelayerChainConfigSchema = z
  .object({
    /** The Sequence v2 wallet contracts; default: their production addresses. */
    context: z.object({ factory: Address, mainModule: Address, mainModuleUpgradable: Address, guestModule: Address, utils: Address }).optional(),
    /**
     * EIP-7702: wallet implementations (DelegatedWallet, contracts/DelegatedWallet.sol) an EOA may delegate
     * to and have its bundles relayed (docs/relayer-7702.md). Empty: authorizations are refused.
     */
    delegatedWallets: z.array(Address).max(16).default([]),
    /** Keys of the EOAs that sign and pay for relayed transactions. Keep them secret. */
    senderKeys: z.array(PrivateKey).default([]),
    /** Or derive senders from a BIP-39 mnemonic (m/44'/60'/0'/0/i, i < senderCount), after senderKeys. */
    senderMnemonic: z.string().min(1).optional(),
    senderCount: z.number().int().min(1).max(256).default(1),
    /** A sender whose balance (in ether) falls below this takes no new work until topped up. */
    minSenderBalance: Decimal.default('0'),
    /**
     * Optional sender refill: a treasury key that tops a sender up to `targetBalance` (ether) when it falls
     * below minSenderBalance (docs/project-balances.md). Keep the key secret.
     */
    refill: z.object({ treasuryKey: PrivateKey, targetBalance: Decimal }).strict().optional(),
    /** Optional early warning above minSenderBalance: crossing it sends sender.low_balance with level "warning" (the sender keeps working). */
    warnSenderBalance: Decimal.optional(),
    /**
     * How often a quiet sender (nothing in flight, above its floor) has its nonces and balance read from the
     * node; busy senders are read every block. Lower it to notice balances changed from outside sooner, at
     * more node calls (docs/production.md, node-call sizing).
     */
    quietSenderReadMs: z.number().int().min(0).default(30_000),
    /** Signed transactions a sender may have in flight (not yet mined) at once. */
    maxInFlightPerSender: z.number().int().min(1).max(1024).default(64),
    /** Where fees are paid to (default: the first sender). */
    paymentAddress: Address.optional(),
    /** No fee required (FeeTokens says isFeeRequired=false); every valid bundle is relayed. */
    gasless: z.boolean().default(false),
    feeTokens: z.array(FeeTokenConfigSchema).default([]),
    /** The native/USD Chainlink feed that `quote: 'usd'` price sources divide by (docs/fee-prices.md). */
    nativeUsdFeed: NativeUsdFeedSchema.optional(),
    /** The wrapped native token (WETH) that `uniswapV3` price sources' pools pair the fee token with. */
    wrappedNative: Address.optional(),
    /** The fee is the gas cost times this. */
    feeMarkup: z.number().min(1).max(100).default(1.2),
    /**
     * A fee pays for the whole gas limit at the gas price times this: the room the base fee has to climb
     * between intake and inclusion. No attempt offers more per gas than the fee pays for over the limit, so
     * past it a fee-paying bundle waits for the base fee to fall (docs/relayer-worst-case.md).
     */
    feePriceRoom: z.number().min(1).max(10).default(1.25),
    /** Gas limit = simulated gas times this (plus the intrinsic cost). */
    gasMargin: z.number().min(1).max(10).default(1.25),
    /** Bundles needing more gas than this are refused. */
    maxGasLimit: z.number().int().positive().default(15_000_000),
    quoteTtlSec: z.number().int().positive().default(300),
    /** How long GetMetaTxnReceipt waits for a final status before answering with the current one. */
    receiptWaitMs: z.number().int().min(0).max(60_000).default(15_000),
    /** How often the dispatcher looks for new work and new blocks. */
    pollMs: z.number().int().positive().default(500),
    /** A queued meta-transaction waiting on a predecessor (a nonce gap) for this long is DROPPED. */
    queueTimeoutSec: z.number().int().positive().default(300),
    /** A meta-transaction whose preconditions have not held for this long after SendMetaTxn is DROPPED. */
    preconditionTimeoutSec: z
      .number()
      .int()
      .positive()
      .max(7 * 86_400)
      .default(3_600),
    /** Preconditions one meta-transaction may carry (every one is read once per block while it waits). */
    maxPreconditions: z.number().int().min(1).max(64).default(8),
    /** Meta-transactions of the chain waiting on preconditions at once (all are read every block); past it, new ones are refused. */
    maxPendingPreconditions: z.number().int().min(1).max(20_000).default(2_000),
    /** ... of them one project may hold (each keyed project has its own share of the pool). */
    maxPendingPreconditionsPerProject: z.number().int().min(1).max(20_000).default(500),
    /** The share of maxPendingPreconditions (percent, rounded up) that callers without an access key may hold together; 0: none. */
    anonymousPendingPreconditionsPercent: z.number().int().min(0).max(100).default(10),
    /** preconditionTimeoutSec for a meta-transaction sent without an access key (the shorter of the two applies). */
    anonymousPreconditionTimeoutSec: z
      .number()
      .int()
      .positive()
      .max(7 * 86_400)
      .default(600),
    /**
     * What one client network (lossBudget.ipv4Prefix / ipv6Prefix) may hold of its project's share, or of
     * the keyless share (percent, rounded up): a dapp's key is public, and 500 free sponsored rows from
     * three addresses filled a project's share for an hour (issue 54).
     */
    pendingPreconditionsPerClientPercent: z.number().int().min(1).max(100).default(10),
    /** ... and one wallet (percent, rounded up; maxQueuedPerWallet bounds it too). */
    pendingPreconditionsPerWalletPercent: z.number().int().min(1).max(100).default(5),
    /**
     * preconditionTimeoutSec for a sponsored meta-transaction (it pays no fee) whose wallets have no history
     * (the call deploys them: they have never run a transaction); the shortest that applies wins. Such rows
     * cost their sender nothing, so they hold their place in the pool for a shorter time.
     */
    newWalletSponsoredPreconditionTimeoutSec: z
      .number()
      .int()
      .positive()
      .max(7 * 86_400)
      .default(600),
    /** A bundle's nonce may be at most this far past the wallet's next one (counting its queued meta-transactions). */
    maxNonceAhead: z.number().int().min(0).max(1024).default(8),
    /** Meta-transactions one wallet may have queued or in flight at once. */
    maxQueuedPerWallet: z.number().int().min(1).default(16),
    /** ... one access key (every caller of a browser dapp shares its key). */
    maxQueuedPerKey: z.number().int().min(1).default(5_000),
    /** ... one client address (IP), sent without an access key (keyed sends are bounded by maxQueuedPerKey instead). */
    maxQueuedPerAddress: z.number().int().min(1).default(200),
    /** The gas limit of a meta-transaction sent without an access key (it pays its own fee) is at most this; so is each bundle FeeOptions and Simulate run for such a caller. */
    anonymousMaxGasLimit: z.number().int().positive().default(3_000_000),
    /**
     * What fee-paying callers can cost the relayer when their fee is not final by construction (a bundle
     * can revert when mined and take its fee with it): each such meta-transaction counts its worst case
     * (its fee's worth, which bounds what any attempt of it may be signed for) while it is live, and what
     * it cost without its fee for an hour after; a new one is refused when a budget it counts against is
     * full (docs/relayer-worst-case.md). Amounts in gas, worth the chain's gas price at the time of the
     * check, so one default fits every chain.
     */
    lossBudget: z
      .object({
        /** One fee-paying wallet (at least maxGasLimit × feePriceRoom, or the largest bundles could never be sent). */
        perWalletGas: z.number().int().positive().default(20_000_000),
        /** One client network (ipv4Prefix / ipv6Prefix), over every key and none. */
        perClientGas: z.number().int().positive().default(40_000_000),
        /** One client network under one access key (keyless callers count as one key). */
        perKeyClientGas: z.number().int().positive().default(40_000_000),
        /** One access key, over all its clients. */
        perKeyGas: z.number().int().positive().default(400_000_000),
        /** Every caller without an access key together: the most strangers without a key can cost per hour. */
        keylessGas: z.number().int().positive().default(100_000_000),
        /** The client network of an IPv4 / IPv6 address: a /24 or a /48 is one client (one attacker has many addresses in it). */
        ipv4Prefix: z.number().int().min(8).max(32).default(24),
        ipv6Prefix: z.number().int().min(16).max(128).default(48),
        /** Fees that did not arrive from this many client networks of one key within a day bar the whole key (and alert). */
        keyBarAfterNetworks: z.number().int().min(2).max(1_000).default(3),
      })
      .strict()
      .default({
        perWalletGas: 20_000_000,
        perClientGas: 40_000_000,
        perKeyClientGas: 40_000_000,
        perKeyGas: 400_000_000,
        keylessGas: 100_000_000,
        ipv4Prefix: 24,
        ipv6Prefix: 48,
        keyBarAfterNetworks: 3,
      }),
    /** Bundles one FeeOptions call may carry: each is a simulation of its own on the node. */
    maxFeeOptionsBundles: z.number().int().min(1).max(256).default(16),
    /** State-override bytes (code placed for simulation) one FeeOptions call may send the node, over all its bundles. */
    maxOverrideBytes: z.number().int().min(1_024).max(16_777_216).default(262_144),
    /** A transaction not included within this many blocks is replaced at the same nonce with higher fees. */
    resubmitAfterBlocks: z.number().int().min(1).default(3),
    /**
     * A slot whose last attempt's max fee has been below the next base fee for this many blocks, and that
     * no replacement within its cover can lift over it, is freed: a zero-value self-transfer at market fees,
     * paid by the relayer, takes its nonce and its meta-transactions are DROPPED (docs/relayer-worst-case.md).
     */
    unblockAfterBlocks: z.number().int().min(1).max(10_000).default(10),
    /**
     * Senders (of those a process holds, when it holds more) kept for bundles that pay today's price: one
     * whose cover cannot pay for the first attempt's max fee (the base fee doubled) never goes to them.
     */
    reserveSenders: z.number().int().min(0).max(256).default(1),
    /** How much a replacement raises both fees over the last broadcast; nodes refuse less than 10. */
    replacementBumpPercent: z.number().int().min(10).max(1000).default(10),
    /** No transaction is signed with a max fee per gas above this (gwei); a replacement that would need more waits. */
    feeCapGwei: z.number().positive().default(500),
    /** The lowest priority fee offered (gwei), whatever recent blocks paid. */
    minPriorityFeeGwei: z.number().min(0).default(0.001),
    /** Blocks a mined transaction is watched for reorgs; its meta-transaction is final after this many. */
    confirmations: z.number().int().min(1).max(256).default(3),
    /** Pack up to this many ready meta-transactions of different wallets into one guest-module transaction (1 = off). */
    batchSize: z.number().int().min(1).max(64).default(1),
  })
  .refine((r) => r.senderKeys.length > 0 || r.senderMnemonic, { message: 'a relayer needs senderKeys or a senderMnemonic', path: ['senderKeys'] })
  .refine((r) => !r.refill || Number(r.refill.targetBalance) > Number(r.minSenderBalance), { message: 'refill.targetBalance must be above minSenderBalance', path: ['refill', 'targetBalance'] })
  .refine((r) => r.nativeUsdFeed || !r.feeTokens.some((t) => t.prices.some((p) => p.kind === 'chainlink' && p.quote === 'usd')), {
    message: "a chainlink price quoted in 'usd' needs the relayer's nativeUsdFeed",
    path: ['nativeUsdFeed'],
  })
  .refine((r) => r.wrappedNative || !r.feeTokens.some((t) => t.prices.some((p) => p.kind === 'uniswapV3')), { message: "a uniswapV3 price needs the relayer's wrappedNative", path: ['wrappedNative'] })
  .refine((r) => !r.feeTokens.some((t) => t.address === null && t.prices.length > 0), { message: 'the native fee token is worth exactly 1: it takes no price sources', path: ['feeTokens'] });

export const RelayerServiceConfigSchema = z
  .object({
    /** Signs fee quotes; every process of one deployment needs the same one (METARELAY_QUOTE_SECRET). */
    quoteSecret: z.string().min(32, 'the quote secret must be at least 32 characters').optional(),
    /** Run the dispatcher (signing, sending, receipts) inside `serve`/`dev`; `metarelay relayer` runs it alone. */
    inProcessDispatcher: z.boolean().default(true),
    /**
     * Which of a fleet's dispatching processes (PostgreSQL) dispatch a chain: `leader`, one at a time (an
     * advisory-lock leader per chain, replaced within postgres.leaderCheckMs when it dies; the others'
     * intakes wake it by NOTIFY), so its passes, sweeps and batches are not split; `every`, each with a
     * fair share of the chain's senders (for a chain whose signing one process cannot keep up with).
     */
    dispatchers: z.enum(['leader', 'every']).default('leader'),
    /**
     * Rows a sponsorship rule's spend is shared out over (docs/sponsorship.md; more are made while every
     * one is busy): a charge takes one with room that no other charge holds, never waiting; a charge
     * that finds none takes the rule's row and shares out again.
     */
    sponsorSpendShards: z.number().int().min(1).max(256).default(16),
    /** Relayer calls without an access key, per client address: a token bucket, for the fleet's API processes together (docs/production.md, "Rates across the fleet"). */
    anonymousRatePerSec: z.number().positive().default(10),
    anonymousBurst: z.number().int().min(1).default(40),
    /** Relayer calls with the admin token (the operator's back office): one bucket of their own, for the fleet together. */
    operatorRatePerSec: z.number().positive().default(200),
    operatorBurst: z.number().int().min(1).default(1_000),
    /**
     * Gas that FeeOptions and Simulate may simulate for callers without an access key, per client address
     * (for the fleet together): a token bucket in gas. A call takes its whole gas budget (anonymousMaxGasLimit) up front
     * and gets back what its simulations did not use; without the budget left, 429 with Retry-After.
     */
    anonymousSimulationGasPerSec: z.number().positive().default(6_000_000),
    anonymousSimulationGasBurst: z.number().int().min(1).default(30_000_000),
    /**
     * Node simulations run at once for callers without an access key, all of them together, per process;
     * past that they wait in line (at most anonymousSimulationQueue, else 429): keyed callers never queue behind them.
     */
    anonymousSimulationConcurrency: z.number().int().min(1).default(2),
    anonymousSimulationQueue: z.number().int().min(0).default(32),
    /** GetMetaTxnReceipt calls held open at once, per process and per client address; past that the current status is answered at once. */
    maxReceiptWaiters: z.number().int().min(0).default(2_000),
    maxReceiptWaitersPerAddress: z.number().int().min(0).default(32),
  })
  .prefault({});
