import type { Address } from 'viem';
import { z } from 'zod';
import { CAP_NAMES, EMPTY_POLICY, needsUsd, parseUsd, type Cap, type SponsorPolicy } from './policy.ts';
import type { PolicyPatch } from './sponsors.ts';

/*
 * The policy fields of AddGasSponsor / UpdateGasSponsor (relayer admin API and console alike), as
 * metarelay extras beside the reference's GasSponsor arguments. JSON nulls are dropped before
 * validation (Go clients send them for absent optionals), so "" is what clears a cap or a date, and
 * [] clears a list.
 */

/** The most wallets one allow or deny list holds. */
export const MAX_LISTED = 1_000;

const clear = z.literal('');
const WeiText = z
  .string()
  .trim()
  .regex(/^\d{1,78}$/, 'must be a decimal amount of wei (or "" for none)');
const UsdText = z
  .union([z.string(), z.number().nonnegative()])
  .transform((v) => String(v).trim())
  .refine((v) => /^\d{1,40}(\.\d{1,18})?$/.test(v), 'must be a decimal amount of US dollars, at most 18 fractional digits (or "" for none)');
const When = z
  .string()
  .trim()
  .refine((v) => /^\d{4}-\d{2}-\d{2}/.test(v) && !Number.isNaN(Date.parse(v)), 'must be an ISO 8601 date-time (or "" for none)');
const Wallets = z
  .array(z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'not a 20-byte 0x address'))
  .max(MAX_LISTED, `at most ${MAX_LISTED} wallets`)
  .transform((list) => [...new Set(list.map((a) => a.toLowerCase() as Address))]);

export const PolicyFields = {
  dailyCapWei: z.union([clear, WeiText]).optional(),
  dailyCapUsd: z.union([clear, UsdText]).optional(),
  walletDailyCapWei: z.union([clear, WeiText]).optional(),
  walletDailyCapUsd: z.union([clear, UsdText]).optional(),
  txnCapWei: z.union([clear, WeiText]).optional(),
  txnCapUsd: z.union([clear, UsdText]).optional(),
  totalBudgetWei: z.union([clear, WeiText]).optional(),
  totalBudgetUsd: z.union([clear, UsdText]).optional(),
  validFrom: z.union([clear, When]).optional(),
  validUntil: z.union([clear, When]).optional(),
  allowWallets: Wallets.optional(),
  denyWallets: Wallets.optional(),
};
const PolicyObject = z.object(PolicyFields);
export type PolicyInput = z.infer<typeof PolicyObject>;

/** A caller's mistake in the policy fields (InvalidArgument on the wire). */
export class PolicyError extends Error {}

/** A cap's change: each unit undefined (kept), null (cleared) or set. */
type CapPatch = { wei?: bigint | null; usd?: bigint | null };
/** The wire fields as a change: undefined keeps a field, null clears it. */
export type WirePatch = Omit<PolicyPatch, (typeof CAP_NAMES)[number]> & { [K in (typeof CAP_NAMES)[number]]?: CapPatch };

export function policyPatch(input: PolicyInput): WirePatch {
  const patch: WirePatch = {};
  for (const name of CAP_NAMES) {
    const wei = input[`${name}Wei`];
    const usd = input[`${name}Usd`];
    if (wei === undefined && usd === undefined) continue;
    // Setting one unit leaves the other as it is: the merge below fills it from the rule.
    patch[name] = { wei: wei === undefined ? undefined : wei === '' ? null : BigInt(wei), usd: usd === undefined ? undefined : usd === '' ? null : parseUsd(usd) };
  }
  if (input.validFrom !== undefined) patch.validFrom = input.validFrom === '' ? null : new Date(input.validFrom);
  if (input.validUntil !== undefined) patch.validUntil = input.validUntil === '' ? null : new Date(input.validUntil);
  if (input.allowWallets !== undefined) patch.allowWallets = input.allowWallets.length ? input.allowWallets : null;
  if (input.denyWallets !== undefined) patch.denyWallets = input.denyWallets;
  return patch;
}

/** The rule's policy with the patch applied (a cap's untouched unit kept), checked as a whole. */
export function mergePolicy(base: SponsorPolicy = EMPTY_POLICY, patch: WirePatch, opts: { usdPriced: boolean; network: string }): { policy: SponsorPolicy; patch: PolicyPatch } {
  const policy: SponsorPolicy = { ...base };
  const full: PolicyPatch = {};
  for (const name of CAP_NAMES) {
    const p = patch[name];
    if (p === undefined) continue;
    const cap: Cap = { wei: p.wei === undefined ? base[name].wei : p.wei, usd: p.usd === undefined ? base[name].usd : p.usd };
    policy[name] = full[name] = cap;
  }
  if (patch.validFrom !== undefined) policy.validFrom = full.validFrom = patch.validFrom;
  if (patch.validUntil !== undefined) policy.validUntil = full.validUntil = patch.validUntil;
  if (patch.allowWallets !== undefined) policy.allowWallets = full.allowWallets = patch.allowWallets;
  if (patch.denyWallets !== undefined) policy.denyWallets = full.denyWallets = patch.denyWallets ?? [];
  if (policy.validFrom && policy.validUntil && policy.validFrom >= policy.validUntil) {
    throw new PolicyError(`validFrom (${policy.validFrom.toISOString()}) must be before validUntil (${policy.validUntil.toISOString()})`);
  }
  const both = policy.allowWallets?.filter((w) => policy.denyWallets.includes(w)) ?? [];
  if (both.length) throw new PolicyError(`wallet ${both[0]} is on both the allow list and the deny list`);
  if (needsUsd(policy) && !opts.usdPriced) {
    throw new PolicyError(`caps in USD need a native/USD price, and the relayer of network ${opts.network} has no nativeUsdFeed`);
  }
  return { policy, patch: full };
}
