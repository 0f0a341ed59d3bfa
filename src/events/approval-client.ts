import { getAddress } from 'viem';
import type { Logger } from '../telemetry/logger.ts';
import type { ApprovalRequest, SponsorApprover } from '../relayer/index.ts';
import type { Poster } from '../untrusted/post.ts';

/** The JSON POSTed to a sponsorship rule's approval webhook (docs/webhooks.md). */
export function approvalBody(req: ApprovalRequest) {
  const { rule, call } = req;
  return {
    type: 'sponsorship.approval',
    stage: req.stage,
    chainId: req.chainId,
    rule: { id: rule.id, projectId: rule.projectId, kind: rule.kind, address: getAddress(rule.address), name: rule.name, maxGasLimit: rule.maxGas },
    metaTxnId: call.id,
    entrypoint: getAddress(call.entrypoint),
    wallet: getAddress(call.bundles[0]?.wallet ?? call.entrypoint),
    deploys: call.deploys.map((a) => getAddress(a)),
    calls: call.leaves.map((l) => ({
      wallet: getAddress(l.executor),
      to: getAddress(l.target),
      value: l.value.toString(),
      data: l.data,
      delegateCall: l.delegateCall,
      revertOnError: l.revertOnError,
    })),
    estimatedGas: req.gasLimit.toString(),
    gasPrice: req.gasPrice.toString(),
    estimatedCostWei: (req.gasLimit * req.gasPrice).toString(),
  };
}

/**
 * Asks approval webhooks through the SSRF-guarded poster. Only a 2xx whose JSON body has
 * `"sponsor": true` within the deadline approves; a slow, failing, redirecting or unclear answer does not.
 */
export function approvalClient(post: Poster, deadlineMs: number, log: Logger): SponsorApprover {
  return async (req) => {
    const headers: Record<string, string> = {};
    if (req.rule.webhookAuthToken) headers.authorization = `Bearer ${req.rule.webhookAuthToken}`;
    const res = await post(req.rule.webhookUrl, JSON.stringify(approvalBody(req)), headers, deadlineMs);
    let reason: string;
    if (res.error) reason = res.error;
    else if (res.status < 200 || res.status >= 300) reason = `it answered HTTP ${res.status}`;
    else {
      let answer: unknown;
      try {
        answer = JSON.parse(res.body);
      } catch {
        answer = undefined;
      }
      if ((answer as { sponsor?: unknown } | undefined)?.sponsor === true) return { approved: true, reason: 'approved' };
      reason = 'its answer was not {"sponsor": true}';
    }
    // The URL and token stay out of the log: the rule's id says which one.
    log.info({ sponsorId: req.rule.id, chainId: req.chainId, stage: req.stage, status: res.status, ms: res.ms, reason }, 'sponsorship approval webhook did not approve');
    return { approved: false, reason };
  };
}
