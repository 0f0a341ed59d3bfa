import type { Queryable } from '../store/db.ts';
import { crossingKind, type BalanceCrossing } from '../relayer/index.ts';
import { appendEventsCounting, type EventBell } from './outbox.ts';

/**
 * The sweep's balance hook: sender.low_balance when a sender's level gets worse (below the warning
 * threshold, or below minSenderBalance), sender.recovered when it gets better. Senders are the
 * deployment's, not a project's: every subscribed endpoint gets them.
 */
export function senderBalanceEvents(bell: EventBell) {
  return async (q: Queryable, c: BalanceCrossing) => {
    const type = crossingKind(c);
    if (!type) return;
    const { deliveries } = await appendEventsCounting(q, [
      {
        type,
        chainId: c.chainId,
        projectId: null,
        subject: `sender:${c.chainId}:${c.sender}`,
        data: {
          chainId: c.chainId,
          sender: c.sender,
          level: c.to,
          previousLevel: c.from,
          balance: c.balance.toString(),
          minSenderBalance: c.minSenderBalance.toString(),
          warnSenderBalance: c.warnSenderBalance?.toString() ?? null,
          // "low": the sender takes no new work until topped up; "warning": it still works.
          takesWork: c.to !== 'low',
        },
      },
    ]);
    bell.ring(deliveries > 0);
  };
}
