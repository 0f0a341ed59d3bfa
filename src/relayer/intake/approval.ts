import type { DecodedCall } from './bundle.ts';
import type { SponsorRule } from './sponsors.ts';

/** What a sponsorship rule's approval webhook is asked (docs/webhooks.md shows the JSON). */
export interface ApprovalRequest {
  rule: SponsorRule;
  chainId: number;
  /** 'feeOptions' while quoting, 'send' before a meta-transaction is accepted, 'check' for the console's CheckSponsorship. */
  stage: 'feeOptions' | 'send' | 'check';
  call: DecodedCall;
  gasLimit: bigint;
  gasPrice: bigint;
}

/** Says whether the rule's owner approves; anything but a clear yes in time is a no (with why). */
export type SponsorApprover = (req: ApprovalRequest) => Promise<{ approved: boolean; reason: string }>;

/**
 * One answer per rule for one intake: a send that is decided again (a budget race lost at the charge)
 * does not ask a webhook twice.
 */
export function askOnce(approve: SponsorApprover | undefined): SponsorApprover {
  const asked = new Map<number, ReturnType<SponsorApprover>>();
  return (req) => {
    let answer = asked.get(req.rule.id);
    // Without an approver wired, a rule that wants approval cannot get it.
    if (!answer) asked.set(req.rule.id, (answer = approve ? approve(req) : Promise.resolve({ approved: false, reason: 'no approval client' })));
    return answer;
  };
}
