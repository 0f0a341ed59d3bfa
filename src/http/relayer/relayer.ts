import { decodeAbiParameters, parseAbiParameters, type Address, type Hex as HexString } from 'viem';
import { z } from 'zod';
import {
  FINAL_STATUSES,
  RelayError,
  TRANSACTION_TUPLE,
  feeTokenWire,
  receiptWire,
  relayerHealth,
  simulateUnsigned,
  switchSender,
  type ChainRelayer,
  type MetaTxnRow,
  type RelayErrorKind,
  type SimulationMeter,
  type HealthDeps,
} from '../../relayer/index.ts';
import type { Services } from '../../services.ts';
import { RelayerErrors, RpcError, relayerErrorMap as E, type ErrorDef } from '../core/errors.ts';
import { method, type RpcContext, type ServiceDef } from '../core/webrpc.ts';
import { IpBuckets } from '../../util/ip-buckets.ts';
import { Limiter, LimiterFull } from '../../util/limiter.ts';
import { runtimeStatus, seesDetail, versionInfo, type StatusDeps } from '../health/status-methods.ts';
import { NoArgs } from '../core/args.ts';
import { MetaTxId, Preconditions, authorizationArg } from './args.ts';
import { BALANCE_ADMIN_METHODS, balanceMethods, type BalanceDeps } from './balances.ts';
import { clientAddress } from '../core/client-address.ts';
import { legacyTxn, metaTxnLog } from './logs.ts';
import { REFUSED_ADMIN_METHODS, refusedMethods } from './unsupported.ts';
import { SPONSOR_ADMIN_METHODS, sponsorMethods, type SponsorDeps } from './sponsors.ts';

import { RelayerPage, paging } from './paging.ts';

/** What the Relayer service uses: each network's relayer, its meta-transactions and receipt waiters, the chains' heads, the networks, the config and the database, and what the relayer's health (bars), RuntimeStatus, gas tanks and sponsorships use. */
export type RelayerServiceDeps = HealthDeps & StatusDeps & BalanceDeps & SponsorDeps & Pick<Services, 'chains' | 'config' | 'db' | 'fleet' | 'metaTxns' | 'networks' | 'receiptWaiters' | 'relayers'>;

export const RELAYER_SCHEMA = 'sequence-relayer@v0.4.1';

const KIND_TO_ERROR: Record<RelayErrorKind, ErrorDef> = {
  invalidArgument: RelayerErrors.InvalidArgument,
  simulationFailed: RelayerErrors.SimulationFailed,
  insufficientFee: RelayerErrors.InsufficientFee,
  conflict: RelayerErrors.RequestConflict,
  notFound: RelayerErrors.NotFound,
  unavailable: RelayerErrors.Unavailable,
  barred: RelayerErrors.PermissionDenied,
  rateLimited: RelayerErrors.RateLimited,
};

const Hex = z.string().regex(/^0x([0-9a-fA-F]{2})*$/, 'must be 0x-prefixed hex bytes');
const Addr = z
  .string()
  .regex(/^0x[0-9a-fA-F]{40}$/, 'not a 20-byte 0x address')
  .transform((a) => a.toLowerCase() as Address);
/** A uint: a JSON number, a decimal string, or a 0x hex string (the v2 client sends nonce spaces as hex). */
const Uint = z
  .union([
    z.number().int().nonnegative(),
    z
      .string()
      .trim()
      .regex(/^(0x[0-9a-fA-F]+|\d+)$/, 'must be a decimal or 0x hex integer'),
  ])
  .transform((v) => BigInt(v));
const ProjectId = z.number().int().positive();
/** A sender by its RuntimeStatus index. */
const SenderArgs = z.object({ sender: z.number().int().nonnegative() }).loose();

const txsParam = parseAbiParameters(`${TRANSACTION_TUPLE}[]`);

/** The relayer of the network in the path (`/relayer/<name or id>/rpc/Relayer/...`). */
function relayerFor(s: Pick<Services, 'networks' | 'relayers'>, ctx: RpcContext): ChainRelayer {
  const network = ctx.params.network ?? '';
  const found = s.networks.lookup(network);
  if (!found.ok) throw new RpcError(RelayerErrors.InvalidChain, found.message);
  const r = s.relayers.get(found.chain.chainId);
  if (!r) throw new RpcError(RelayerErrors.InvalidChain, `no relayer is configured for network ${found.chain.name}`);
  return r;
}

async function run<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof RelayError) throw new RpcError(KIND_TO_ERROR[err.kind], err.message);
    throw err;
  }
}

function ownProject(ctx: RpcContext, projectId: number) {
  if (!ctx.project) throw new RpcError(RelayerErrors.Unauthorized, 'access key required');
  if (ctx.project.id !== projectId) throw new RpcError(RelayerErrors.PermissionDenied, `the access key belongs to project ${ctx.project.id}, not ${projectId}`);
}

export function relayerService(s: RelayerServiceDeps): ServiceDef {
  const rc = s.config.relayer;
  // The buckets' rates are the fleet's: each API process holds its share (util/fleet-share.ts).
  const anonymous = new IpBuckets(rc.anonymousRatePerSec, rc.anonymousBurst, s.fleet);
  // The admin token's calls: one bucket for the operator, whatever address its back office calls from.
  const operator = new IpBuckets(rc.operatorRatePerSec, rc.operatorBurst, s.fleet);
  // Keyless simulations: a bucket in gas per client address, and a share of this process's node calls.
  const keylessGas = new IpBuckets(rc.anonymousSimulationGasPerSec, rc.anonymousSimulationGasBurst, s.fleet);
  const keylessShare = new Limiter(rc.anonymousSimulationConcurrency, rc.anonymousSimulationQueue);
  const PUBLIC = new Set([
    'Ping',
    'Version',
    'RuntimeStatus',
    'GetSequenceContext',
    'GetChainID',
    'FeeTokens',
    'FeeOptions',
    'GetMetaTxnNonce',
    'GetMetaTxnReceipt',
    'GetMetaTxnStatus',
    'Simulate',
    'SendMetaTxn',
    'UpdateMetaTxnGasLimits',
    'GetMetaTxnNetworkFeeOptions',
  ]);
  const ADMIN = new Set([...SPONSOR_ADMIN_METHODS, 'StartSender', 'StopSender', ...BALANCE_ADMIN_METHODS, ...REFUSED_ADMIN_METHODS]);

  /**
   * Callers without a key have no bucket of their own: they share one per client address, charged by the
   * work asked. The admin token is the operator's: its own generous bucket, never an address's.
   */
  const chargeKeyless = (ctx: RpcContext, cost: number) => {
    if (ctx.project || cost <= 0) return;
    if (ctx.admin) {
      const took = operator.take('operator', Date.now(), cost);
      if (took.ok) return;
      ctx.reply.header('Retry-After', String(took.retryAfterSec));
      throw new RpcError(RelayerErrors.RateLimited, `too many relayer calls with the admin token: retry in ${took.retryAfterSec} s (relayer.operatorRatePerSec, relayer.operatorBurst)`);
    }
    const client = clientAddress(ctx.request.ip, s.config.clientIpv6Prefix);
    const took = anonymous.take(client, Date.now(), cost);
    if (!took.ok) {
      ctx.reply.header('Retry-After', String(took.retryAfterSec));
      throw new RpcError(RelayerErrors.RateLimited, `too many relayer calls without an access key from ${client}: retry in ${took.retryAfterSec} s, or send an access key`);
    }
  };
  /**
   * A keyless caller's node simulations: their gas budget (`budget`) is taken from the client address's gas
   * bucket up front (429 with Retry-After without it) and what they did not use is given back; they run
   * within the keyless share of this process (at most anonymousSimulationConcurrency at once, all keyless
   * callers together), so a keyed caller never waits behind them. A keyed caller runs at once, unmetered.
   */
  const simulating = async <T>(ctx: RpcContext, budget: bigint, work: (meter: SimulationMeter) => Promise<T>): Promise<T> => {
    const meter: SimulationMeter = { gas: 0n };
    if (ctx.project) return work(meter);
    const client = clientAddress(ctx.request.ip, s.config.clientIpv6Prefix);
    const took = keylessGas.take(client, Date.now(), Number(budget));
    if (!took.ok) {
      ctx.reply.header('Retry-After', String(took.retryAfterSec));
      throw new RpcError(
        RelayerErrors.RateLimited,
        `the gas simulated without an access key from ${client} is over ${rc.anonymousSimulationGasPerSec} gas/s (burst ${rc.anonymousSimulationGasBurst}): this call's budget of ${budget} gas is free again in ${took.retryAfterSec} s; retry then, or send an access key`,
      );
    }
    try {
      return await keylessShare.run(() => work(meter));
    } catch (err) {
      if (err instanceof LimiterFull) {
        ctx.reply.header('Retry-After', '1');
        throw new RpcError(
          RelayerErrors.RateLimited,
          `the node simulations this relayer runs for callers without an access key are all busy (${err.limit} running, ${err.waiting} waiting): retry in 1 s, or send an access key`,
        );
      }
      throw err;
    } finally {
      const unused = budget - meter.gas;
      if (unused > 0n) keylessGas.giveBack(client, Number(unused));
    }
  };
  const load = async (r: ChainRelayer, id: string) => {
    const row = await s.metaTxns.find(r.chainId, id);
    if (!row) throw new RpcError(RelayerErrors.NotFound, `no meta-transaction ${id} on ${r.network}`);
    return row;
  };
  const receiptOf = async (r: ChainRelayer, row: MetaTxnRow) => receiptWire(row, await s.metaTxns.bundlesOf(r.chainId, row.id));

  return {
    name: 'Relayer',
    schema: RELAYER_SCHEMA,
    errors: E,
    defaultAuth: (name) => (ADMIN.has(name) ? 'admin' : PUBLIC.has(name) ? 'optional' : 'required'),
    prepare: (ctx) => {
      relayerFor(s, ctx);
      chargeKeyless(ctx, 1);
    },
    methods: {
      // Project balances and gas tanks (admin token): balances.ts.
      ...balanceMethods(s, (ctx) => relayerFor(s, ctx)),
      // RepairSender, ResetSender, UpdateMetaTxnGasLimits, GetMetaTxnNetworkFeeOptions: refused, each saying why.
      ...refusedMethods(),
      Ping: method({ input: NoArgs, handler: async () => ({ status: true }) }),
      Version: method({ input: NoArgs, handler: async () => ({ version: versionInfo('v0.4.1', '3f3835f4f866bc9b4938e84a81ed8081dce1414d') }) }),
      GetChainID: method({ input: NoArgs, handler: async (_a, ctx) => ({ chainID: relayerFor(s, ctx).chainId }) }),
      GetSequenceContext: method({
        input: NoArgs,
        handler: async (_a, ctx) => {
          const c = relayerFor(s, ctx).context;
          return { data: { factory: c.factory, mainModule: c.mainModule, mainModuleUpgradable: c.mainModuleUpgradable, guestModule: c.guestModule, utils: c.utils } };
        },
      }),
      RuntimeStatus: method({
        input: NoArgs,
        handler: async (_a, ctx) => {
          const r = relayerFor(s, ctx);
          // Keyless: no senders, balances, queue, prices or node errors (seesDetail).
          const detailed = seesDetail(ctx);
          const base = await runtimeStatus(s, detailed);
          const [block, health] = await Promise.all([s.chains.get(r.chainId)!.head.read(), detailed ? relayerHealth(s, r) : undefined]);
          return { status: { ...base, chainID: r.chainId, useEIP1559: block.baseFeePerGas != null, ...health } };
        },
      }),
      FeeTokens: method({
        input: NoArgs,
        handler: async (_a, ctx) => {
          const r = relayerFor(s, ctx);
          return { isFeeRequired: r.isFeeRequired, tokens: r.isFeeRequired ? r.feeTokens.map((t) => feeTokenWire(r.chainId, t)) : [], paymentAddress: r.paymentAddress };
        },
      }),
      FeeOptions: method({
        input: z.object({ wallet: Addr, to: Addr, data: Hex, simulate: z.boolean().optional(), authorization: z.unknown().optional() }).loose(),
        handler: (a, ctx) =>
          run(async () => {
            // Every fee is computed from a simulation (the gas limit signed is the one simulated): simulate:false cannot be honoured.
            if (a.simulate === false)
              throw new RelayError(
                'invalidArgument',
                'simulate: false is not supported: every fee option is computed from a simulation of the bundle (docs/relayer-worst-case.md); leave simulate out or send true',
              );
            const auth = authorizationArg({ authorization: a.authorization });
            const r = relayerFor(s, ctx);
            const decoded = r.decode(a.wallet, a.to, a.data);
            // Refused before any node call when it carries too many bundles; a keyless caller's gas is then metered.
            r.feeOptionsWork(decoded);
            const projectId = ctx.project?.id ?? null;
            const out = await simulating(ctx, r.simulationGasCap(projectId), (meter) =>
              r.feeOptions(projectId, a.wallet, a.to, a.data, auth, decoded, meter, { keyId: ctx.keyId, clientIp: clientAddress(ctx.request.ip, s.config.clientIpv6Prefix) }),
            );
            return {
              // metarelay extras: the price each option was computed at, and the tokens withdrawn for want of one.
              options: out.options.map((o) => ({ token: feeTokenWire(r.chainId, o.token), to: o.to, value: o.value.toString(), gasLimit: o.gasLimit, price: o.price })),
              sponsored: out.sponsored,
              quote: out.quote,
              unpriced: out.unpriced.map((u) => ({ token: feeTokenWire(r.chainId, u.token), reason: u.reason })),
              // metarelay extra: the rules that cover the bundle, or the first limit that stopped them.
              sponsorship: out.sponsorship,
            };
          }),
      }),
      SendMetaTxn: method({
        input: z
          .object({
            call: z.object({ walletAddress: z.string(), contract: z.string(), input: Hex, authorization: z.unknown().optional() }).loose(),
            quote: z.string().max(4096).optional(),
            projectID: z.number().int().optional(),
            preconditions: Preconditions,
            authorization: z.unknown().optional(),
          })
          .loose(),
        handler: (a, ctx) =>
          run(async () => {
            const authorization = authorizationArg({ 'call.authorization': a.call.authorization, authorization: a.authorization });
            if (a.projectID != null && a.projectID !== ctx.project?.id) {
              throw new RpcError(RelayerErrors.PermissionDenied, 'projectID must be the project of the access key sent');
            }
            const r = relayerFor(s, ctx);
            const projectId = ctx.project?.id ?? null;
            const args = {
              projectId,
              keyId: ctx.keyId,
              clientIp: clientAddress(ctx.request.ip, s.config.clientIpv6Prefix),
              walletAddress: a.call.walletAddress,
              contract: a.call.contract,
              input: a.call.input,
              quote: a.quote,
              preconditions: a.preconditions ?? undefined,
              authorization,
            };
            // A keyless send simulates like a keyless FeeOptions: within the keyless share, charged by gas.
            // A refused one keeps its whole budget charged (its simulations ran all the same); an accepted
            // one is charged the gas it was measured to use.
            const cap = r.simulationGasCap(projectId);
            const res = await simulating(ctx, cap, async (meter) => {
              meter.gas = cap;
              const out = await r.send(args);
              meter.gas = BigInt(out.row.gas_estimated ?? cap);
              return out;
            });
            return { status: true, txnHash: res.id };
          }),
      }),
      GetMetaTxnNonce: method({
        input: z.object({ walletContractAddress: Addr, space: Uint.optional() }).loose(),
        handler: (a, ctx) =>
          run(async () => {
            const space = a.space ?? 0n;
            if (space >= 1n << 160n) throw new RelayError('invalidArgument', 'space must fit in 160 bits');
            return { nonce: (await relayerFor(s, ctx).nextNonce(a.walletContractAddress, space)).toString() };
          }),
      }),
      GetMetaTxnReceipt: method({
        input: z.object({ metaTxID: MetaTxId }).loose(),
        handler: async (a, ctx) => {
          const r = relayerFor(s, ctx);
          // Held until the status is final (or the wait is over), so pollers need not hammer.
          const row = await s.receiptWaiters.wait(r.chainId, await load(r, a.metaTxID), clientAddress(ctx.request.ip, s.config.clientIpv6Prefix), r.receiptWaitMs);
          return { receipt: await receiptOf(r, row), metaTxnEnqueued: true };
        },
      }),
      GetMetaTxnStatus: method({
        input: z.object({ metaTxID: MetaTxId }).loose(),
        handler: async (a, ctx) => {
          const r = relayerFor(s, ctx);
          const row = await load(r, a.metaTxID);
          return { status: row.status, metaTxnEnqueued: true, ...(FINAL_STATUSES.has(row.status) && row.status !== 'DROPPED' ? { receipt: await receiptOf(r, row) } : {}) };
        },
      }),
      Simulate: method({
        input: z.object({ wallet: Addr, transactions: Hex }).loose(),
        handler: (a, ctx) =>
          run(async () => {
            const r = relayerFor(s, ctx);
            let txs;
            try {
              [txs] = decodeAbiParameters(txsParam, a.transactions as HexString);
            } catch {
              throw new RelayError('invalidArgument', `transactions must be ABI-encoded ${TRANSACTION_TUPLE}[]`);
            }
            const cap = r.simulationGasCap(ctx.project?.id ?? null);
            const results = await simulating(ctx, cap, async (meter) => {
              // The whole cap is charged unless the run comes back with what it used.
              meter.gas = cap;
              const out = await simulateUnsigned(r.simulationClient(!ctx.project), r.chainId, a.wallet, txs, cap, await r.runAs());
              meter.gas = out.reduce((g, x) => g + x.gasUsed, 0n);
              return out;
            });
            return {
              results: results.map((x, i) => ({
                executed: x.executed,
                succeeded: x.succeeded,
                result: x.executed ? x.result : null,
                reason: x.reason ?? null,
                gasUsed: Number(x.gasUsed),
                gasLimit: Number(txs[i].gasLimit),
              })),
            };
          }),
      }),
      GetMetaTransactions: method({
        input: z.object({ projectId: ProjectId, page: RelayerPage, includeNonSponsored: z.boolean().optional() }).loose(),
        handler: async (a, ctx) => {
          ownProject(ctx, a.projectId);
          const r = relayerFor(s, ctx);
          const p = paging(a.page, 20);
          // includeNonSponsored false: the sponsored ones only (Sequence's gas-tank listing); true or left out: all of the project's.
          const { page, rows: shown } = p.cut(await s.metaTxns.byProject(a.projectId, r.chainId, p.offset, p.limit, undefined, a.includeNonSponsored === false));
          const bundles = await s.metaTxns.bundlesOfMany(
            r.chainId,
            shown.map((row) => row.id),
          );
          const logs = shown.map((row) => {
            const b = bundles.get(row.id)?.[0];
            return metaTxnLog(row, b ? ((BigInt(b.nonce_space) << 96n) | BigInt(b.nonce)).toString() : undefined);
          });
          return { page, transactions: logs };
        },
      }),
      SentTransactions: method({
        input: z.object({ filter: z.object({ pending: z.boolean().optional(), failed: z.boolean().optional() }).loose().optional(), page: RelayerPage }).loose(),
        handler: async (a, ctx) => {
          if (!ctx.project) throw new RpcError(RelayerErrors.Unauthorized, 'access key required');
          const r = relayerFor(s, ctx);
          const p = paging(a.page, 20);
          const statuses = a.filter?.pending ? ['SENT'] : a.filter?.failed ? ['FAILED', 'PARTIALLY_FAILED', 'DROPPED'] : ['SENT', 'SUCCEEDED', 'PARTIALLY_FAILED', 'FAILED'];
          const { page, rows } = p.cut(await s.metaTxns.byProject(ctx.project.id, r.chainId, p.offset, p.limit, statuses));
          return { page, transactions: rows.map((x) => legacyTxn(x)) };
        },
      }),
      PendingTransactions: method({
        input: z.object({ page: RelayerPage }).loose(),
        handler: async (a, ctx) => {
          if (!ctx.project) throw new RpcError(RelayerErrors.Unauthorized, 'access key required');
          const r = relayerFor(s, ctx);
          const p = paging(a.page, 20);
          const { page, rows } = p.cut(await s.metaTxns.byProject(ctx.project.id, r.chainId, p.offset, p.limit, ['PENDING_PRECONDITION', 'QUEUED', 'SENT']));
          return { page, transactions: rows.map((x) => legacyTxn(x)) };
        },
      }),

      ...sponsorMethods(s, (ctx) => relayerFor(s, ctx)),
      StopSender: method({ input: SenderArgs, handler: (a, ctx) => run(async () => (await switchSender(s.db, relayerFor(s, ctx), a.sender, false), {})) }),
      StartSender: method({ input: SenderArgs, handler: (a, ctx) => run(async () => (await switchSender(s.db, relayerFor(s, ctx), a.sender, true), {})) }),
    },
  };
}
