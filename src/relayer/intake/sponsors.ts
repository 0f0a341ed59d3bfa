import { keccak256, toFunctionSelector, toHex, type Address } from 'viem';
import { z } from 'zod';
import { prepared, type Db, type Queryable } from '../../store/db.ts';
import { tokenMoveAbi } from '../abi.ts';
import { selectorOf, type DecodedCall, type Leaf } from './bundle.ts';
import { EMPTY_POLICY, formatUsd, type Cap, type SponsorPolicy } from './policy.ts';
import { spendOfRule } from './spend-of-rule.ts';
import { shareInFlight } from '../../util/single-flight.ts';

/**
 * What a sponsorship rule covers, leaf by leaf (a leaf is one call a wallet makes):
 * - WALLET: every call made by that wallet (any bundle it signs).
 * - CONTRACT: every call to that contract (not a delegate call).
 * - TOKEN: calls to that token contract that move it: transfer, transferFrom, safeTransferFrom, safeBatchTransferFrom.
 * - ADDRESS: native-currency transfers to that address (value > 0, no calldata).
 * - ANY: the union of the four.
 * A meta-transaction is sponsored when every one of its calls is covered by an active rule of the
 * project; deploying the wallets it uses is covered along with them. Only executes of real Sequence
 * wallets (recognised by their code) with revertOnError=true are unfolded into their calls; any other
 * call — an `execute` on some other contract included — is judged as the call it is.
 *
 * A CONTRACT rule pays for everything that contract does when called, callbacks into other contracts
 * included (an NFT's onERC721Received, a router's swaps): give it a gas ceiling (maxGas) to bound what
 * one meta-transaction can cost.
 */
export const SponsorKind = z.enum(['ANY', 'WALLET', 'TOKEN', 'CONTRACT', 'ADDRESS']);
export type SponsorKind = z.infer<typeof SponsorKind>;

export interface SponsorRule {
  id: number;
  /** The project the rule belongs to, or null for an ecosystem's rule (it covers every project in the ecosystem). */
  projectId: number | null;
  ecosystemId: number | null;
  chainId: number;
  kind: SponsorKind;
  address: Address;
  name: string;
  active: boolean;
  /** The most gas one covered meta-transaction may need; null: no ceiling. */
  maxGas: number | null;
  /** The approval webhook ('' for none): asked before this rule sponsors a bundle (intake/approval.ts). */
  webhookUrl: string;
  /** Sent to the approval webhook as `Authorization: Bearer <token>` ('' for none). */
  webhookAuthToken: string;
  /** Caps, validity window and wallet lists (intake/policy.ts). */
  policy: SponsorPolicy;
  /** What it has spent today (UTC) and in all, in wei and atto-USD. */
  spent: { todayWei: bigint; todayUsd: bigint; totalWei: bigint; totalUsd: bigint };
  createdAt: Date;
  updatedAt: Date;
}

const TOKEN_MOVES = new Set<string>(tokenMoveAbi.map((f) => toFunctionSelector(f)));

export function covers(rule: Pick<SponsorRule, 'kind' | 'address'>, leaf: Leaf): boolean {
  const a = rule.address;
  const wallet = leaf.executor === a;
  const contract = !leaf.delegateCall && leaf.target === a;
  const token = contract && TOKEN_MOVES.has(selectorOf(leaf.data));
  const native = !leaf.delegateCall && leaf.target === a && leaf.value > 0n && leaf.data === '0x';
  switch (rule.kind) {
    case 'WALLET':
      return wallet;
    case 'CONTRACT':
      return contract;
    case 'TOKEN':
      return token;
    case 'ADDRESS':
      return native;
    case 'ANY':
      return wallet || contract || native;
  }
}

export interface Coverage {
  sponsored: boolean;
  /** The rules that matched (the first one is recorded on the meta-transaction). */
  ruleIds: number[];
  /** Why not, naming the first call no rule covers. */
  reason?: string;
  /** The first call no rule covers. */
  uncovered?: Leaf;
}

export function coverage(call: DecodedCall, rules: readonly Pick<SponsorRule, 'id' | 'kind' | 'address' | 'active'>[]): Coverage {
  const active = rules.filter((r) => r.active);
  if (active.length === 0) return { sponsored: false, ruleIds: [], reason: 'neither the project nor its ecosystem has an active sponsorship on this network' };
  const used = new Set<number>();
  for (const leaf of leavesOf(call)) {
    const rule = active.find((r) => covers(r, leaf));
    if (!rule) {
      return { sponsored: false, ruleIds: [], reason: `no sponsorship covers the call from ${leaf.executor} to ${leaf.target}`, uncovered: leaf };
    }
    used.add(rule.id);
  }
  return { sponsored: true, ruleIds: [...used] };
}

/** The calls a rule must cover. A bundle with no calls at all (e.g. a bare wallet deployment) is covered by its wallet's rule only. */
export function leavesOf(call: DecodedCall): Leaf[] {
  return call.leaves.length ? call.leaves : call.bundles.map((b, i) => ({ executor: b.wallet, target: b.wallet, value: 0n, data: '0x', delegateCall: true, revertOnError: true, bundle: i, index: 0 }));
}

/**
 * What a quote is bound to: every call of the bundle except its fee payments, in order. Wallet
 * deployments are left out too: clients quote a bundle before wrapping it for an undeployed wallet.
 */
export function bundleKey(call: DecodedCall, fees: readonly { bundle: number; index: number }[]): string {
  const isFee = (l: Leaf) => fees.some((f) => f.bundle === l.bundle && f.index === l.index);
  const parts = call.leaves.filter((l) => !isFee(l)).map((l) => [l.executor, l.target, l.value.toString(), l.data.toLowerCase(), l.delegateCall ? 1 : 0]);
  return keccak256(toHex(JSON.stringify(parts)));
}

type Num = string | number | null;

export interface SponsorRow {
  id: string | number;
  project_id: string | number | null;
  ecosystem_id: string | number | null;
  chain_id: string | number;
  kind: SponsorKind;
  address: string;
  name: string;
  active: boolean;
  max_gas: Num;
  webhook_url: string;
  webhook_auth_token: string;
  daily_cap_wei: Num;
  daily_cap_usd: Num;
  wallet_daily_cap_wei: Num;
  wallet_daily_cap_usd: Num;
  txn_cap_wei: Num;
  txn_cap_usd: Num;
  total_budget_wei: Num;
  total_budget_usd: Num;
  valid_from: Date | string | null;
  valid_until: Date | string | null;
  allow_wallets: string[] | null;
  deny_wallets: string[] | null;
  spent_wei: Num;
  spent_usd: Num;
  today_wei: Num;
  today_usd: Num;
  created_at: Date | string;
  updated_at: Date | string;
}

const big = (v: Num) => (v == null ? null : BigInt(v));
const cap = (wei: Num, usd: Num): Cap => ({ wei: big(wei), usd: big(usd) });
const date = (v: Date | string | null) => (v == null ? null : new Date(v));

export const toRule = (r: SponsorRow): SponsorRule => ({
  id: Number(r.id),
  projectId: r.project_id == null ? null : Number(r.project_id),
  ecosystemId: r.ecosystem_id == null ? null : Number(r.ecosystem_id),
  chainId: Number(r.chain_id),
  kind: r.kind,
  address: r.address as Address,
  name: r.name,
  active: r.active,
  maxGas: r.max_gas == null ? null : Number(r.max_gas),
  webhookUrl: r.webhook_url ?? '',
  webhookAuthToken: r.webhook_auth_token ?? '',
  policy: {
    dailyCap: cap(r.daily_cap_wei, r.daily_cap_usd),
    walletDailyCap: cap(r.wallet_daily_cap_wei, r.wallet_daily_cap_usd),
    txnCap: cap(r.txn_cap_wei, r.txn_cap_usd),
    totalBudget: cap(r.total_budget_wei, r.total_budget_usd),
    validFrom: date(r.valid_from),
    validUntil: date(r.valid_until),
    allowWallets: r.allow_wallets == null ? null : (r.allow_wallets as Address[]),
    denyWallets: (r.deny_wallets ?? []) as Address[],
  },
  spent: { todayWei: big(r.today_wei) ?? 0n, todayUsd: big(r.today_usd) ?? 0n, totalWei: big(r.spent_wei) ?? 0n, totalUsd: big(r.spent_usd) ?? 0n },
  createdAt: new Date(r.created_at),
  updatedAt: new Date(r.updated_at),
});

/** Every column of a rule, with today's spend (UTC) beside its totals. */
const SELECT = `SELECT g.id, g.project_id, g.ecosystem_id, g.chain_id, g.kind, g.address, g.name, g.active, g.max_gas, g.webhook_url, g.webhook_auth_token,
  g.daily_cap_wei::text AS daily_cap_wei, g.daily_cap_usd::text AS daily_cap_usd, g.wallet_daily_cap_wei::text AS wallet_daily_cap_wei,
  g.wallet_daily_cap_usd::text AS wallet_daily_cap_usd, g.txn_cap_wei::text AS txn_cap_wei, g.txn_cap_usd::text AS txn_cap_usd,
  g.total_budget_wei::text AS total_budget_wei, g.total_budget_usd::text AS total_budget_usd, g.valid_from, g.valid_until, g.allow_wallets, g.deny_wallets,
  s.spent_wei::text AS spent_wei, s.spent_usd::text AS spent_usd, s.today_wei::text AS today_wei, s.today_usd::text AS today_usd,
  g.created_at, g.updated_at
  FROM gas_sponsors g ${spendOfRule('g')}`;

/** A change to a rule's policy: undefined keeps a field, null clears it. */
export type PolicyPatch = { [K in keyof SponsorPolicy]?: SponsorPolicy[K] | null };

/** Policy fields → columns (caps in two columns each). */
function policyColumns(p: PolicyPatch): Array<[string, unknown]> {
  const out: Array<[string, unknown]> = [];
  const caps: Array<[keyof PolicyPatch, string]> = [
    ['dailyCap', 'daily_cap'],
    ['walletDailyCap', 'wallet_daily_cap'],
    ['txnCap', 'txn_cap'],
    ['totalBudget', 'total_budget'],
  ];
  for (const [k, col] of caps) {
    if (!(k in p) || p[k] === undefined) continue;
    const c = (p[k] as Cap | null) ?? { wei: null, usd: null };
    out.push([`${col}_wei`, c.wei?.toString() ?? null], [`${col}_usd`, c.usd?.toString() ?? null]);
  }
  if (p.validFrom !== undefined) out.push(['valid_from', p.validFrom?.toISOString() ?? null]);
  if (p.validUntil !== undefined) out.push(['valid_until', p.validUntil?.toISOString() ?? null]);
  if (p.allowWallets !== undefined) out.push(['allow_wallets', p.allowWallets?.map((a) => a.toLowerCase()) ?? null]);
  if (p.denyWallets !== undefined) out.push(['deny_wallets', (p.denyWallets ?? []).map((a) => a.toLowerCase())]);
  return out;
}

export class SponsorConflict extends Error {}

/**
 * Whose rules: a project id, or an ecosystem. A rule is read, changed and removed only through its
 * owner; a project's intake sees its own rules and those of its ecosystem (`forProject`).
 */
export type RuleOwner = number | { ecosystemId: number };
const ownerOf = (o: RuleOwner): [column: 'project_id' | 'ecosystem_id', id: number] => (typeof o === 'number' ? ['project_id', o] : ['ecosystem_id', o.ecosystemId]);

/** A new rule, of a project or of an ecosystem. */
export type NewRule = ({ projectId: number } | { ecosystemId: number }) & NewRuleFields;

interface NewRuleFields {
  chainId: number;
  kind: SponsorKind;
  address: Address;
  name: string;
  active: boolean;
  maxGas?: number | null;
  webhookUrl?: string;
  webhookAuthToken?: string;
  policy?: PolicyPatch;
}

export interface RulePatch {
  name?: string;
  active?: boolean;
  /** undefined keeps the ceiling, null removes it. */
  maxGas?: number | null;
  webhookUrl?: string;
  webhookAuthToken?: string;
  policy?: PolicyPatch;
}

/** Rules as they are now (their spend included), by id. */
export async function currentRules(q: Queryable, ids: number[]): Promise<SponsorRule[]> {
  const r = await q.query<SponsorRow>(`${SELECT} WHERE g.id = ANY($1::bigint[]) ORDER BY g.id`, [ids]);
  return r.rows.map(toRule);
}

export function sponsorRepo(db: Db) {
  const one = async (q: Queryable, id: number) => {
    const r = await q.query<SponsorRow>(`${SELECT} WHERE g.id = $1`, [id]);
    return toRule(r.rows[0]);
  };
  const forProject = shareInFlight(
    (projectId: number, chainId: number) => `${projectId}:${chainId}`,
    async (projectId: number, chainId: number): Promise<SponsorRule[]> => {
      const r = await db.query<SponsorRow>(
        prepared(`${SELECT} WHERE (g.project_id = $1 OR g.ecosystem_id = (SELECT p.ecosystem_id FROM projects p WHERE p.id = $1))
           AND g.chain_id = $2 AND g.deleted_at IS NULL ORDER BY g.id`),
        [projectId, chainId],
      );
      return r.rows.map(toRule);
    },
  );

  return {
    /** The owner's own rules (not its ecosystem's: see forProject). */
    async list(owner: RuleOwner, chainId: number | null, offset = 0, limit = 1000): Promise<SponsorRule[]> {
      const [col, id] = ownerOf(owner);
      const r = await db.query<SponsorRow>(
        prepared(`${SELECT} WHERE g.${col} = $1 AND ($2::bigint IS NULL OR g.chain_id = $2) AND g.deleted_at IS NULL
         ORDER BY g.id OFFSET $3 LIMIT $4`),
        [id, chainId, offset, limit],
      );
      return r.rows.map(toRule);
    },
    /**
     * What may sponsor a project's bundles on a chain: its rules and those of its ecosystem. Asked by
     * every sponsored intake of the project: concurrent asks share one read (the charge checks the
     * budgets again under the rules' locks). The rules returned are shared: callers do not change them.
     */
    forProject,
    /** Live rules with a daily cap or a total budget (what the alerts watch), of one project (null: every one), at most `limit`. */
    async capped(projectId: number | null, limit = 10_000): Promise<SponsorRule[]> {
      const r = await db.query<SponsorRow>(
        `${SELECT} WHERE g.deleted_at IS NULL AND g.active AND ($1::bigint IS NULL OR g.project_id = $1)
           AND (g.daily_cap_wei IS NOT NULL OR g.daily_cap_usd IS NOT NULL OR g.total_budget_wei IS NOT NULL OR g.total_budget_usd IS NOT NULL)
         ORDER BY g.id LIMIT $2`,
        [projectId, limit],
      );
      return r.rows.map(toRule);
    },
    async byAddress(address: Address, chainId: number | null, offset = 0, limit = 1000): Promise<SponsorRule[]> {
      const r = await db.query<SponsorRow>(
        `${SELECT} WHERE g.address = $1 AND ($2::bigint IS NULL OR g.chain_id = $2) AND g.deleted_at IS NULL
         ORDER BY g.id OFFSET $3 LIMIT $4`,
        [address.toLowerCase(), chainId, offset, limit],
      );
      return r.rows.map(toRule);
    },
    async get(owner: RuleOwner, id: number): Promise<SponsorRule | undefined> {
      const [col, ownerId] = ownerOf(owner);
      const r = await db.query<SponsorRow>(`${SELECT} WHERE g.id = $1 AND g.${col} = $2 AND g.deleted_at IS NULL`, [id, ownerId]);
      return r.rows[0] ? toRule(r.rows[0]) : undefined;
    },
    /**
     * Locks rules for a charge (spend-caps.ts), in id order so two charges never wait on each other
     * crosswise; returns them as they are now, under the lock.
     */
    async lock(q: Queryable, ids: number[]): Promise<SponsorRule[]> {
      const locked = await q.query<{ id: string }>('SELECT id FROM gas_sponsors WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE', [ids]);
      const r = await q.query<SponsorRow>(`${SELECT} WHERE g.id = ANY($1::bigint[]) ORDER BY g.id`, [locked.rows.map((x) => x.id)]);
      return r.rows.map(toRule);
    },
    async add(rule: NewRule): Promise<SponsorRule> {
      try {
        return await db.transaction(async (tx) => {
          const r = await tx.query<{ id: string }>(
            `INSERT INTO gas_sponsors (project_id, ecosystem_id, chain_id, kind, address, name, active, max_gas, webhook_url, webhook_auth_token)
             VALUES ($1, $10, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id`,
            [
              'projectId' in rule ? rule.projectId : null,
              rule.chainId,
              rule.kind,
              rule.address.toLowerCase(),
              rule.name,
              rule.active,
              rule.maxGas ?? null,
              rule.webhookUrl ?? '',
              rule.webhookAuthToken ?? '',
              'ecosystemId' in rule ? rule.ecosystemId : null,
            ],
          );
          const id = Number(r.rows[0].id);
          await setPolicy(tx, id, rule.policy ?? {});
          return one(tx, id);
        });
      } catch (err) {
        if ((err as { code?: string }).code === '23505')
          throw new SponsorConflict(`${'ecosystemId' in rule ? 'the ecosystem' : 'the project'} already has a ${rule.kind} sponsorship for ${rule.address}`);
        throw err;
      }
    },
    async update(owner: RuleOwner, id: number, patch: RulePatch): Promise<SponsorRule | undefined> {
      const [col, ownerId] = ownerOf(owner);
      return db.transaction(async (tx) => {
        const r = await tx.query<{ id: string }>(
          `UPDATE gas_sponsors SET name = COALESCE($3, name), active = COALESCE($4, active),
             max_gas = CASE WHEN $5::boolean THEN $6::bigint ELSE max_gas END,
             webhook_url = COALESCE($7, webhook_url), webhook_auth_token = COALESCE($8, webhook_auth_token), updated_at = now()
           WHERE id = $1 AND ${col} = $2 AND deleted_at IS NULL RETURNING id`,
          [id, ownerId, patch.name ?? null, patch.active ?? null, patch.maxGas !== undefined, patch.maxGas ?? null, patch.webhookUrl ?? null, patch.webhookAuthToken ?? null],
        );
        if (!r.rows[0]) return undefined;
        await setPolicy(tx, id, patch.policy ?? {});
        return one(tx, id);
      });
    },
    async remove(owner: RuleOwner, id: number): Promise<boolean> {
      const [col, ownerId] = ownerOf(owner);
      const r = await db.query(`UPDATE gas_sponsors SET deleted_at = now(), active = false WHERE id = $1 AND ${col} = $2 AND deleted_at IS NULL`, [id, ownerId]);
      return r.rowCount > 0;
    },
  };
}
export type SponsorRepo = ReturnType<typeof sponsorRepo>;

async function setPolicy(q: Queryable, id: number, patch: PolicyPatch) {
  const cols = policyColumns(patch);
  if (cols.length === 0) return;
  const sets = cols.map(([c], i) => `${c} = $${i + 2}`).join(', ');
  await q.query(`UPDATE gas_sponsors SET ${sets}, updated_at = now() WHERE id = $1`, [id, ...cols.map(([, v]) => v)]);
}

const capWire = (c: Cap) => ({ wei: c.wei?.toString() ?? null, usd: c.usd == null ? null : formatUsd(c.usd) });

/**
 * The reference's GasSponsor, plus metarelay's extras: `kind`, `maxGasLimit` (the gas ceiling of one
 * covered meta-transaction, null: none) and the policy (docs/sponsorship.md) with what was spent.
 * USD amounts are decimal strings of dollars.
 */
export function sponsorWire(r: SponsorRule) {
  const p = r.policy ?? EMPTY_POLICY;
  const c = { daily: capWire(p.dailyCap), wallet: capWire(p.walletDailyCap), txn: capWire(p.txnCap), total: capWire(p.totalBudget) };
  return {
    id: r.id,
    gasTankId: 0,
    // 0 where the rule has no such owner, as Sequence's server sends it.
    projectId: r.projectId ?? 0,
    ecosystemId: r.ecosystemId ?? 0,
    chainId: r.chainId,
    address: r.address,
    name: r.name,
    active: r.active,
    webhookUrl: r.webhookUrl,
    webhookAuthToken: r.webhookAuthToken,
    // Only live rules are answered; null, not "", so a client decoding it as a time (Go) still can.
    deletedAt: null,
    kind: r.kind,
    maxGasLimit: r.maxGas,
    dailyCapWei: c.daily.wei,
    dailyCapUsd: c.daily.usd,
    walletDailyCapWei: c.wallet.wei,
    walletDailyCapUsd: c.wallet.usd,
    txnCapWei: c.txn.wei,
    txnCapUsd: c.txn.usd,
    totalBudgetWei: c.total.wei,
    totalBudgetUsd: c.total.usd,
    validFrom: p.validFrom?.toISOString() ?? null,
    validUntil: p.validUntil?.toISOString() ?? null,
    allowWallets: p.allowWallets,
    denyWallets: p.denyWallets,
    spentTodayWei: r.spent.todayWei.toString(),
    spentTodayUsd: formatUsd(r.spent.todayUsd),
    spentTotalWei: r.spent.totalWei.toString(),
    spentTotalUsd: formatUsd(r.spent.totalUsd),
    updatedAt: r.updatedAt.toISOString(),
    createdAt: r.createdAt.toISOString(),
  };
}
