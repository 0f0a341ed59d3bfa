import type { DecodedCall } from './bundle.ts';
import { coverage, withinCeilings, type Coverage, type SponsorRule } from './sponsors.ts';

/** What a sponsorship rule's approval webhook is asked (docs/webhooks.md shows the JSON). */
export interface ApprovalRequest {
  rule: SponsorRule;
  chainId: number;
  /** 'feeOptions' while quoting, 'send' before a meta-transaction is accepted. */
  stage: 'feeOptions' | 'send';
  call: DecodedCall;
  gasLimit: bigint;
  gasPrice: bigint;
}

/** Says whether the rule's owner approves; anything but a clear yes in time is a no (with why). */
export type SponsorApprover = (req: ApprovalRequest) => Promise<{ approved: boolean; reason: string }>;

/**
 * Coverage with the rules' gas ceilings and approval webhooks: a rule with a webhook covers the bundle
 * only if its webhook says yes. A rule that says no (or does not answer) is left out and coverage is
 * worked out again without it, since another rule of the project may still cover those calls.
 */
export async function approvedCoverage(call: DecodedCall, rules: readonly SponsorRule[], gasLimit: bigint, ask: Omit<ApprovalRequest, 'rule' | 'call' | 'gasLimit'>, approve: SponsorApprover | undefined): Promise<Coverage> {
  let pool = [...rules];
  const refusals: string[] = [];
  for (;;) {
    let cover = coverage(call, pool);
    if (cover.sponsored) cover = withinCeilings(cover, pool, gasLimit);
    if (!cover.sponsored) return refusals.length ? { ...cover, reason: `${cover.reason}; ${refusals.join('; ')}` } : cover;
    const gated = pool.filter((r) => cover.ruleIds.includes(r.id) && r.webhookUrl);
    if (gated.length === 0) return cover;
    // Without an approver wired, a rule that wants approval cannot get it.
    const answers = await Promise.all(gated.map((rule) => (approve ? approve({ ...ask, rule, call, gasLimit }) : Promise.resolve({ approved: false, reason: 'no approval client' }))));
    const refused = gated.filter((_, i) => !answers[i].approved);
    if (refused.length === 0) return cover;
    refused.forEach((r) => refusals.push(`sponsorship ${r.id}'s approval webhook did not approve it (${answers[gated.indexOf(r)].reason})`));
    pool = pool.filter((r) => !refused.includes(r));
  }
}
