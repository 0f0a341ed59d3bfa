import type { Queryable } from '../store/db.ts';
import type { TaskRow } from '../metadata/index.ts';
import { appendEventsCounting, type EventBell } from './outbox.ts';

/**
 * The task store's hook: one refresh.task_finished per task reaching DONE or FAILED, on the
 * transaction that ended it. A project's task goes to its endpoints; the chain watcher's (no
 * project) to every subscribed endpoint.
 */
export function taskFinishedEvents(bell: EventBell) {
  return async (q: Queryable, tasks: TaskRow[]) => {
    const { deliveries } = await appendEventsCounting(
      q,
      tasks.map((t) => ({
        type: 'refresh.task_finished' as const,
        chainId: t.chain_id,
        projectId: t.project_id,
        subject: `task:${t.id}`,
        data: {
          taskId: t.id,
          chainId: t.chain_id,
          kind: t.kind,
          contractAddress: t.contract_address,
          status: t.status,
          cancelled: t.cancelled,
          refreshAll: t.refresh_all,
          source: t.source,
          total: t.total,
          succeeded: t.succeeded,
          failed: t.failed,
          lastError: t.last_error,
          createdAt: t.created_at.toISOString(),
          finishedAt: t.finished_at?.toISOString() ?? null,
        },
      })),
    );
    bell.ring(deliveries > 0);
  };
}
