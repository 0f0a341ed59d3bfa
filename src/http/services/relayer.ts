import { decodeAbiParameters, parseAbiParameters, type Address, type Hex as HexString } from 'viem';
import { z } from 'zod';
import {
  FINAL_STATUSES,
  PolicyError,
  PolicyFields,
  RelayError,
  SponsorConflict,
  SponsorKind,
  TRANSACTION_TUPLE,
  bareId,
  feeTokenWire,
  mergePolicy,
  policyPatch,
  receiptWire,
  relayerHealth,
  simulateUnsigned,
  sponsorWire,
  switchSender,
  type ChainRelayer,
  type MetaTxnRow,
  type RelayErrorKind,
} from '../../relayer/index.ts';
import type { Services } from '../../services.ts';
import { RelayerErrors, RpcError, relayerErrorMap as E, type ErrorDef } from '../errors.ts';
import { method, type RpcContext, type ServiceDef } from '../webrpc.ts';
import { IpBuckets } from '../ip-buckets.ts';
import { NoArgs, runtimeStatus, versionInfo } from './common.ts';
import { targetProblem } from '../../events/post.ts';
import { Preconditions, authorizationArg } from './relayer-args.ts';
import { BALANCE_ADMIN_METHODS, balanceMethods } from './relayer-balances.ts';
import { clientAddress } from '../client-address.ts';

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
/** An id as clients send it: with or without 0x, any case. */
export const MetaTxId = z
  .string()
  .trim()
  .regex(/^(0x)?[0-9a-fA-F]{64}$/, 'must be a 32-byte meta-transaction id (64 hex digits, 0x optional)')
  .transform(bareId);
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
/** A sponsorship rule's gas ceiling per meta-transaction (metarelay's extra field). */
export const MaxGas = z.number().int().min(21_000).max(1_000_000_000);
/** A sponsorship rule's approval webhook: an http(s) URL, or "" for none (its address is vetted when it is called). */
export const WebhookUrl = z
  .string()
  .max(2_000)
  .refine((u) => u === '' || !targetProblem(u), { error: (i) => targetProblem(String(i.input)) ?? 'invalid URL' });
export const WebhookToken = z.string().max(500);
/** The reference's argument some Sequence clients still send; only the single tank this relayer has (0) is accepted. */
const GasTankId = z.literal(0).optional();

/** A rule's policy fields checked against the rule as it is (none for a new one) and the network's USD price source. */
function policyOf(r: ChainRelayer, a: Parameters<typeof policyPatch>[0], base?: Parameters<typeof mergePolicy>[0]) {
  try {
    return mergePolicy(base, policyPatch(a), { usdPriced: r.deps.config.nativeUsdFeed !== undefined, network: r.deps.chain.name }).patch;
  } catch (err) {
    if (err instanceof PolicyError) throw new RpcError(RelayerErrors.InvalidArgument, err.message);
    throw err;
  }
}
export const RelayerPage = z
  .object({ page: z.number().int().min(0).optional(), pageSize: z.number().int().min(1).max(100).optional() })
  .loose()
  .optional();

const pageWire = (page: number, pageSize: number, more: boolean) => ({ pageSize, page, more, column: '', sort: [] });

/**
 * A requested page: the row offset it starts at and how many rows to read (one more than the page, to
 * tell whether another follows), and `cut` to turn what was read into the page's rows and wire shape.
 */
export function paging(p: { page?: number; pageSize?: number } | undefined, defaultSize: number) {
  const page = p?.page ?? 0;
  const pageSize = p?.pageSize ?? defaultSize;
  return {
    offset: page * pageSize,
    limit: pageSize + 1,
    cut: <T>(rows: T[]) => ({ page: pageWire(page, pageSize, rows.length > pageSize), rows: rows.slice(0, pageSize) }),
  };
}

/** A sender by its RuntimeStatus index. */
const SenderArgs = z.object({ sender: z.number().int().nonnegative() }).loose();

const txsParam = parseAbiParameters(`${TRANSACTION_TUPLE}[]`);

/** The relayer of the network in the path (`/relayer/<name or id>/rpc/Relayer/...`). */
function relayerFor(s: Services, ctx: RpcContext): ChainRelayer {
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

export function metaTxnLog(r: MetaTxnRow, space: string | undefined) {
  return {
    id: 0,
    chainId: r.chain_id,
    projectId: r.project_id ?? 0,
    txnHash: r.txn_hash ?? '',
    txnNonce: String(r.txn_nonce ?? 0),
    metaTxnID: r.id,
    txnStatus: r.status,
    txnRevertReason: r.revert_reason ?? '',
    requeues: r.attempts,
    queuedAt: r.queued_at.toISOString(),
    sentAt: r.sent_at?.toISOString() ?? null,
    minedAt: r.mined_at?.toISOString() ?? null,
    target: r.entrypoint,
    input: r.input,
    txnArgs: {},
    txnReceipt: r.receipt ? JSON.parse(r.receipt) : null,
    walletAddress: r.wallet,
    metaTxnNonce: space ?? '0',
    gasLimit: r.gas_limit,
    gasPrice: r.gas_price ?? '0',
    gasUsed: r.gas_used ?? 0,
    gasEstimated: r.gas_estimated,
    gasFeeMarkup: null,
    usdRate: '0',
    creditsUsed: 0,
    // The sender's whole outlay: the gas, and an OP-stack chain's L1 data fee on top.
    cost: r.gas_used && r.gas_price ? (BigInt(r.gas_used) * BigInt(r.gas_price) + BigInt(r.l1_fee_wei ?? '0')).toString() : '0',
    isWhitelisted: r.sponsored,
    gasSponsor: r.sponsor_id,
    gasTank: null,
    feeToken: r.fee_token,
    feeValue: r.fee_value,
    updatedAt: r.updated_at.toISOString(),
    createdAt: r.queued_at.toISOString(),
  };
}

export function relayerService(s: Services): ServiceDef {
  const anonymous = new IpBuckets(s.config.relayer.anonymousRatePerSec, s.config.relayer.anonymousBurst);
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
  ]);
  const ADMIN = new Set(['ListGasSponsors', 'GetGasSponsor', 'AddGasSponsor', 'UpdateGasSponsor', 'RemoveGasSponsor', 'AddressGasSponsors', 'StartSender', 'StopSender', ...BALANCE_ADMIN_METHODS]);

  /** Callers without a key have no bucket of their own: they share one per client address, charged by the work asked. */
  const chargeKeyless = (ctx: RpcContext, cost: number) => {
    if (ctx.project || cost <= 0) return;
    const client = clientAddress(ctx.request.ip, s.config.clientIpv6Prefix);
    const took = anonymous.take(client, Date.now(), cost);
    if (!took.ok) {
      ctx.reply.header('Retry-After', String(took.retryAfterSec));
      throw new RpcError(RelayerErrors.RateLimited, `too many relayer calls without an access key from ${client}: retry in ${took.retryAfterSec} s, or send an access key`);
    }
  };
  const load = async (r: ChainRelayer, id: string) => {
    const row = await s.metaTxns.find(r.chainId, id);
    if (!row) throw new RpcError(RelayerErrors.NotFound, `no meta-transaction ${id} on ${r.deps.chain.name}`);
    return row;
  };
  const receiptOf = async (r: ChainRelayer, row: MetaTxnRow) => receiptWire(row, await s.metaTxns.bundlesOf(r.chainId, row.id));

  const requireProject = async (projectId: number) => {
    if (!(await s.projects.getById(projectId))) throw new RpcError(RelayerErrors.ProjectNotFound, `no project ${projectId}`);
  };

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
      // Project balances and gas tanks (admin token): relayer-balances.ts.
      ...balanceMethods(s, (ctx) => relayerFor(s, ctx)),
      Ping: method({ input: NoArgs, handler: async () => ({ status: true }) }),
      Version: method({ input: NoArgs, handler: async () => ({ version: versionInfo('v0.4.1', '3f3835f4') }) }),
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
          const base = await runtimeStatus(s);
          const [block, health] = await Promise.all([r.client.getBlock({ blockTag: 'latest' }), relayerHealth(s, r)]);
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
            const auth = authorizationArg({ authorization: a.authorization });
            const r = relayerFor(s, ctx);
            const decoded = r.decode(a.wallet, a.to, a.data);
            // Each bundle is a simulation of its own: a keyless caller pays for the rest of them (prepare took one).
            chargeKeyless(ctx, r.feeOptionsWork(decoded) - 1);
            const out = await r.feeOptions(ctx.project?.id ?? null, a.wallet, a.to, a.data, auth, decoded);
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
            const res = await r.send({
              projectId: ctx.project?.id ?? null,
              keyId: ctx.keyId,
              clientIp: clientAddress(ctx.request.ip, s.config.clientIpv6Prefix),
              walletAddress: a.call.walletAddress,
              contract: a.call.contract,
              input: a.call.input,
              quote: a.quote,
              preconditions: a.preconditions ?? undefined,
              authorization,
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
          const row = await s.receiptWaiters.wait(r.chainId, await load(r, a.metaTxID), clientAddress(ctx.request.ip, s.config.clientIpv6Prefix), r.deps.config.receiptWaitMs);
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
            const results = await simulateUnsigned(r.client, r.chainId, a.wallet, txs, r.simulationGasCap(ctx.project?.id ?? null), await r.gasPriceNow());
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
          const { page, rows: shown } = p.cut(await s.metaTxns.byProject(a.projectId, r.chainId, p.offset, p.limit));
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

      ListGasSponsors: method({
        input: z.object({ projectId: ProjectId, page: RelayerPage }).loose(),
        handler: async (a, ctx) => {
          const r = relayerFor(s, ctx);
          const p = paging(a.page, 50);
          const { page, rows } = p.cut(await s.sponsors.list(a.projectId, r.chainId, p.offset, p.limit));
          return { page, gasSponsors: rows.map(sponsorWire) };
        },
      }),
      GetGasSponsor: method({
        input: z.object({ projectId: ProjectId, id: z.number().int().positive() }).loose(),
        handler: async (a) => {
          const row = await s.sponsors.get(a.projectId, a.id);
          if (!row) throw new RpcError(RelayerErrors.NotFound, `no gas sponsor ${a.id} in project ${a.projectId}`);
          return { gasSponsor: sponsorWire(row) };
        },
      }),
      AddGasSponsor: method({
        input: z
          .object({
            projectId: ProjectId,
            address: Addr,
            name: z.string().max(200).optional(),
            active: z.boolean().optional(),
            kind: SponsorKind.optional(),
            maxGasLimit: MaxGas.optional(),
            webhookUrl: WebhookUrl.optional(),
            webhookAuthToken: WebhookToken.optional(),
            gasTankId: GasTankId,
            ...PolicyFields,
          })
          // Strict: a misspelt policy field is refused, not silently dropped.
          .strict(),
        handler: async (a, ctx) => {
          const r = relayerFor(s, ctx);
          await requireProject(a.projectId);
          const policy = policyOf(r, a);
          try {
            const row = await s.sponsors.add({
              projectId: a.projectId,
              chainId: r.chainId,
              kind: a.kind ?? 'ANY',
              address: a.address,
              name: a.name ?? '',
              active: a.active ?? true,
              maxGas: a.maxGasLimit ?? null,
              webhookUrl: a.webhookUrl,
              webhookAuthToken: a.webhookAuthToken,
              policy,
            });
            return { status: true, gasSponsor: sponsorWire(row) };
          } catch (err) {
            if (err instanceof SponsorConflict) throw new RpcError(RelayerErrors.RequestConflict, err.message);
            throw err;
          }
        },
      }),
      UpdateGasSponsor: method({
        input: z
          .object({
            projectId: ProjectId,
            id: z.number().int().positive(),
            name: z.string().max(200).optional(),
            active: z.boolean().optional(),
            maxGasLimit: MaxGas.nullable().optional(),
            webhookUrl: WebhookUrl.optional(),
            webhookAuthToken: WebhookToken.optional(),
            gasTankId: GasTankId,
            ...PolicyFields,
          })
          .strict(),
        handler: async (a, ctx) => {
          const r = relayerFor(s, ctx);
          const current = await s.sponsors.get(a.projectId, a.id);
          if (!current) throw new RpcError(RelayerErrors.NotFound, `no gas sponsor ${a.id} in project ${a.projectId}`);
          const policy = policyOf(r, a, current.policy);
          const row = await s.sponsors.update(a.projectId, a.id, { name: a.name, active: a.active, maxGas: a.maxGasLimit, webhookUrl: a.webhookUrl, webhookAuthToken: a.webhookAuthToken, policy });
          if (!row) throw new RpcError(RelayerErrors.NotFound, `no gas sponsor ${a.id} in project ${a.projectId}`);
          return { status: true, gasSponsor: sponsorWire(row) };
        },
      }),
      RemoveGasSponsor: method({
        input: z.object({ projectId: ProjectId, id: z.number().int().positive() }).loose(),
        handler: async (a) => {
          if (!(await s.sponsors.remove(a.projectId, a.id))) throw new RpcError(RelayerErrors.NotFound, `no gas sponsor ${a.id} in project ${a.projectId}`);
          return { status: true };
        },
      }),
      StopSender: method({ input: SenderArgs, handler: (a, ctx) => run(async () => (await switchSender(s.db, relayerFor(s, ctx), a.sender, false), {})) }),
      StartSender: method({ input: SenderArgs, handler: (a, ctx) => run(async () => (await switchSender(s.db, relayerFor(s, ctx), a.sender, true), {})) }),
      AddressGasSponsors: method({
        input: z.object({ address: Addr, page: RelayerPage }).loose(),
        handler: async (a, ctx) => {
          const r = relayerFor(s, ctx);
          const p = paging(a.page, 50);
          const { page, rows } = p.cut(await s.sponsors.byAddress(a.address, r.chainId, p.offset, p.limit));
          return { page, gasSponsors: rows.map(sponsorWire) };
        },
      }),
    },
  };
}

/** The legacy (2.2.x) Transaction shape of SentTransactions / PendingTransactions. */
function legacyTxn(r: MetaTxnRow) {
  return {
    txnHash: r.txn_hash,
    blockNumber: r.block_number ?? 0,
    chainId: r.chain_id,
    metaTxnID: r.id,
    status: r.status,
    timestamp: (r.mined_at ?? r.sent_at ?? r.queued_at).toISOString(),
  };
}
