import { keccak256, toFunctionSelector, toHex, type Address } from 'viem';
import { z } from 'zod';
import type { Db } from '../../store/db.ts';
import { tokenMoveAbi } from '../abi.ts';
import { selectorOf, type DecodedCall, type Leaf } from './bundle.ts';

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
  projectId: number;
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
  createdAt: Date;
  updatedAt: Date;
}

const TOKEN_MOVES = new Set<string>(tokenMoveAbi.map((f) => toFunctionSelector(f)));

function covers(rule: SponsorRule, leaf: Leaf): boolean {
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
}

export function coverage(call: DecodedCall, rules: readonly SponsorRule[]): Coverage {
  const active = rules.filter((r) => r.active);
  if (active.length === 0) return { sponsored: false, ruleIds: [], reason: 'the project has no active sponsorship on this network' };
  const used = new Set<number>();
  // A bundle with no calls at all (e.g. a bare wallet deployment) is covered by its wallet's rule only.
  const leaves: Leaf[] = call.leaves.length
    ? call.leaves
    : call.bundles.map((b, i) => ({ executor: b.wallet, target: b.wallet, value: 0n, data: '0x', delegateCall: true, revertOnError: true, bundle: i, index: 0 }));
  for (const leaf of leaves) {
    const rule = active.find((r) => covers(r, leaf));
    if (!rule) {
      return { sponsored: false, ruleIds: [], reason: `no sponsorship covers the call from ${leaf.executor} to ${leaf.target}` };
    }
    used.add(rule.id);
  }
  return { sponsored: true, ruleIds: [...used] };
}

/**
 * A covered meta-transaction stays covered only while its gas is within the ceiling of every rule that
 * covers it (a rule without a ceiling has none).
 */
export function withinCeilings(cover: Coverage, rules: readonly SponsorRule[], gas: bigint): Coverage {
  if (!cover.sponsored) return cover;
  const over = rules.find((r) => cover.ruleIds.includes(r.id) && r.maxGas != null && gas > BigInt(r.maxGas));
  if (!over) return cover;
  return { sponsored: false, ruleIds: [], reason: `it needs ${gas} gas, over the ${over.maxGas} ceiling of sponsorship ${over.id} (${over.kind} ${over.address})` };
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

interface SponsorRow {
  id: string | number;
  project_id: string | number;
  chain_id: string | number;
  kind: SponsorKind;
  address: string;
  name: string;
  active: boolean;
  max_gas: string | number | null;
  webhook_url: string;
  webhook_auth_token: string;
  created_at: Date | string;
  updated_at: Date | string;
}

const toRule = (r: SponsorRow): SponsorRule => ({
  id: Number(r.id),
  projectId: Number(r.project_id),
  chainId: Number(r.chain_id),
  kind: r.kind,
  address: r.address as Address,
  name: r.name,
  active: r.active,
  maxGas: r.max_gas == null ? null : Number(r.max_gas),
  webhookUrl: r.webhook_url ?? '',
  webhookAuthToken: r.webhook_auth_token ?? '',
  createdAt: new Date(r.created_at),
  updatedAt: new Date(r.updated_at),
});

const COLS = 'id, project_id, chain_id, kind, address, name, active, max_gas, webhook_url, webhook_auth_token, created_at, updated_at';

export class SponsorConflict extends Error {}

export function sponsorRepo(db: Db) {
  return {
    async list(projectId: number, chainId: number | null, offset = 0, limit = 1000): Promise<SponsorRule[]> {
      const r = await db.query<SponsorRow>(
        `SELECT ${COLS} FROM gas_sponsors WHERE project_id = $1 AND ($2::bigint IS NULL OR chain_id = $2) AND deleted_at IS NULL
         ORDER BY id OFFSET $3 LIMIT $4`,
        [projectId, chainId, offset, limit],
      );
      return r.rows.map(toRule);
    },
    async byAddress(address: Address, chainId: number | null, offset = 0, limit = 1000): Promise<SponsorRule[]> {
      const r = await db.query<SponsorRow>(
        `SELECT ${COLS} FROM gas_sponsors WHERE address = $1 AND ($2::bigint IS NULL OR chain_id = $2) AND deleted_at IS NULL
         ORDER BY id OFFSET $3 LIMIT $4`,
        [address.toLowerCase(), chainId, offset, limit],
      );
      return r.rows.map(toRule);
    },
    async get(projectId: number, id: number): Promise<SponsorRule | undefined> {
      const r = await db.query<SponsorRow>(`SELECT ${COLS} FROM gas_sponsors WHERE id = $1 AND project_id = $2 AND deleted_at IS NULL`, [id, projectId]);
      return r.rows[0] ? toRule(r.rows[0]) : undefined;
    },
    async add(rule: { projectId: number; chainId: number; kind: SponsorKind; address: Address; name: string; active: boolean; maxGas?: number | null; webhookUrl?: string; webhookAuthToken?: string }): Promise<SponsorRule> {
      try {
        const r = await db.query<SponsorRow>(
          `INSERT INTO gas_sponsors (project_id, chain_id, kind, address, name, active, max_gas, webhook_url, webhook_auth_token) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING ${COLS}`,
          [rule.projectId, rule.chainId, rule.kind, rule.address.toLowerCase(), rule.name, rule.active, rule.maxGas ?? null, rule.webhookUrl ?? '', rule.webhookAuthToken ?? ''],
        );
        return toRule(r.rows[0]);
      } catch (err) {
        if ((err as { code?: string }).code === '23505') throw new SponsorConflict(`the project already has a ${rule.kind} sponsorship for ${rule.address}`);
        throw err;
      }
    },
    /** `maxGas`: undefined keeps the ceiling, null removes it. */
    async update(projectId: number, id: number, patch: { name?: string; active?: boolean; maxGas?: number | null; webhookUrl?: string; webhookAuthToken?: string }): Promise<SponsorRule | undefined> {
      const r = await db.query<SponsorRow>(
        `UPDATE gas_sponsors SET name = COALESCE($3, name), active = COALESCE($4, active),
           max_gas = CASE WHEN $5::boolean THEN $6::bigint ELSE max_gas END,
           webhook_url = COALESCE($7, webhook_url), webhook_auth_token = COALESCE($8, webhook_auth_token), updated_at = now()
         WHERE id = $1 AND project_id = $2 AND deleted_at IS NULL RETURNING ${COLS}`,
        [id, projectId, patch.name ?? null, patch.active ?? null, patch.maxGas !== undefined, patch.maxGas ?? null, patch.webhookUrl ?? null, patch.webhookAuthToken ?? null],
      );
      return r.rows[0] ? toRule(r.rows[0]) : undefined;
    },
    async remove(projectId: number, id: number): Promise<boolean> {
      const r = await db.query(`UPDATE gas_sponsors SET deleted_at = now(), active = false WHERE id = $1 AND project_id = $2 AND deleted_at IS NULL`, [id, projectId]);
      return r.rowCount > 0;
    },
  };
}
export type SponsorRepo = ReturnType<typeof sponsorRepo>;

export function sponsorWire(r: SponsorRule) {
  return {
    id: r.id,
    gasTankId: 0,
    projectId: r.projectId,
    ecosystemId: 0,
    chainId: r.chainId,
    address: r.address,
    name: r.name,
    active: r.active,
    webhookUrl: r.webhookUrl,
    webhookAuthToken: r.webhookAuthToken,
    kind: r.kind,
    // metarelay's extra: the gas ceiling of one covered meta-transaction (null: none).
    maxGasLimit: r.maxGas,
    updatedAt: r.updatedAt.toISOString(),
    createdAt: r.createdAt.toISOString(),
  };
}
