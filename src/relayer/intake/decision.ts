import type { Address } from 'viem';
import type { DecodedCall, Leaf } from './bundle.ts';
import { askOnce, type ApprovalRequest, type SponsorApprover } from './approval.ts';
import { staticStop, type Cost, type Stop } from './policy.ts';
import { coverage, covers, type SponsorRule } from './sponsors.ts';

/*
 * Whether a project's rules sponsor a bundle, and if not, what stopped them. One path for FeeOptions,
 * SendMetaTxn and the console's CheckSponsorship (docs/sponsorship.md):
 *   1. rules stopped by a limit that needs no stored spend (window, wallet lists, gas ceiling,
 *      per-transaction cap) are set aside;
 *   2. the rest must cover every call;
 *   3. the covering rules' budgets (daily, per-wallet daily, total) must have room;
 *   4. the covering rules with an approval webhook must approve.
 * A rule stopped at 3 or 4 is set aside and coverage worked out again (another rule may cover those
 * calls). Charging is not done here: SendMetaTxn charges in the transaction that queues the bundle.
 */

export interface DecisionInput {
  call: DecodedCall;
  /** The project's rules on this network (inactive ones are passed over). */
  rules: readonly SponsorRule[];
  /** For gas ceilings and the approval request; null: ceilings are not checked. */
  gas: bigint | null;
  gasPrice: bigint;
  cost: Cost;
  now: Date;
  /** Budget limits the rules would pass with this cost (spend-caps.ts); without it, no budgets. */
  budgetStops?: (rules: SponsorRule[], wallets: readonly Address[], cost: Cost) => Promise<Stop[]>;
  approve?: SponsorApprover;
  ask: Pick<ApprovalRequest, 'chainId' | 'stage'>;
  /** Limits already known to stop rules (a budget race lost at the charge). */
  stopped?: readonly Stop[];
}

export interface Decision {
  sponsored: boolean;
  /** The rules that cover it (the first is recorded on the meta-transaction); empty when not sponsored. */
  ruleIds: number[];
  /** "covered by …", or why not. */
  reason: string;
  /** The first limit that stopped a rule that would otherwise have covered it. */
  stop: Stop | null;
  /** The wallets whose bundles it runs (per-wallet caps and lists apply to each). */
  wallets: Address[];
}

export const walletsOf = (call: DecodedCall): Address[] => [...new Set(call.bundles.map((b) => b.wallet.toLowerCase() as Address))];

export async function decideSponsorship(input: DecisionInput): Promise<Decision> {
  const { call, cost } = input;
  const wallets = walletsOf(call);
  const approve = askOnce(input.approve);
  const stops: Stop[] = [...(input.stopped ?? [])];
  const isStopped = (r: SponsorRule) => stops.some((s) => s.ruleId === r.id);
  for (const r of input.rules) {
    if (!r.active || isStopped(r)) continue;
    const s = staticStop(r, { wallets, gas: input.gas, cost, now: input.now });
    if (s) stops.push(s);
  }
  for (;;) {
    const pool = input.rules.filter((r) => r.active && !isStopped(r));
    const cover = coverage(call, pool);
    if (!cover.sponsored) {
      if (!input.rules.some((r) => r.active)) return { sponsored: false, ruleIds: [], reason: cover.reason!, stop: null, wallets };
      const stop = firstStop(stops, input.rules, cover.uncovered);
      return { sponsored: false, ruleIds: [], reason: stop ? stop.reason : cover.reason!, stop, wallets };
    }
    const covering = pool.filter((r) => cover.ruleIds.includes(r.id));
    const over = input.budgetStops ? await input.budgetStops(covering, wallets, cost) : [];
    if (over.length) {
      stops.push(...over);
      continue;
    }
    const gated = covering.filter((r) => r.webhookUrl);
    const answers = await Promise.all(gated.map((rule) => approve({ ...input.ask, rule, call, gasLimit: input.gas ?? 0n, gasPrice: input.gasPrice })));
    const refused = gated.filter((_, i) => !answers[i].approved);
    if (refused.length) {
      refused.forEach((r) =>
        stops.push({ ruleId: r.id, limit: 'approval', reason: `sponsorship ${r.id} (${r.kind} ${r.address})'s approval webhook did not approve it (${answers[gated.indexOf(r)].reason})` }),
      );
      continue;
    }
    return { sponsored: true, ruleIds: cover.ruleIds, reason: `covered by ${covering.map((r) => `${r.kind} ${r.address} (#${r.id})`).join(', ')}`, stop: null, wallets };
  }
}

/**
 * What stopped the bundle: the limit of the lowest-numbered rule that would have covered the first
 * call no rule covers (any stop at all when the call is not known).
 */
function firstStop(stops: readonly Stop[], rules: readonly SponsorRule[], leaf: Leaf | undefined): Stop | null {
  const candidates = stops.filter((s) => {
    const rule = rules.find((r) => r.id === s.ruleId);
    return rule && (!leaf || covers(rule, leaf));
  });
  return candidates.sort((a, b) => a.ruleId - b.ruleId)[0] ?? null;
}
