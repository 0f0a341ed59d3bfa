import type { Address } from 'viem';
import type { ChainClient } from '../../chain/client.ts';
import type { AppConfig } from '../../config/schema.ts';
import type { TaskRow, TaskStore } from './task-store.ts';

export class RefreshLimitError extends Error {}
export class TaskNotFoundError extends Error {}

export interface Enqueued {
  taskId: number;
  /** The request was answered by work already queued or just done (no new task). */
  joined: boolean;
}

const LARGE_TASK_PRIORITY = 10;
const WATCHER_PRIORITY = 5;

/**
 * How refresh work enters the queue: requests for tokens already queued join that work, tokens a
 * task refreshed within the cool-off are not queued again, and a project has a cap on queued tokens.
 */
export class RefreshService {
  constructor(private readonly d: { tasks: TaskStore; config: AppConfig }) {}

  /** The same service writing through another store, e.g. one bound to a transaction. */
  withTasks(tasks: TaskStore): RefreshService {
    return new RefreshService({ ...this.d, tasks });
  }

  private priorityFor(count: number, source: string): number {
    if (count > this.d.config.refresh.largeTaskThreshold) return LARGE_TASK_PRIORITY;
    return source === 'watcher' ? WATCHER_PRIORITY : 0;
  }

  private async checkQuota(projectId: number | null, adding: number) {
    if (projectId === null) return;
    const max = this.d.config.refresh.maxQueuedPerProject;
    const queued = await this.d.tasks.queuedCount(projectId);
    if (queued + adding > max) {
      throw new RefreshLimitError(`the project has ${queued} tokens queued; at most ${max} may be queued at once`);
    }
  }

  async enqueueTokens(projectId: number | null, chain: ChainClient, contract: Address, tokenIds: string[], opts: { source?: string } = {}): Promise<Enqueued> {
    const source = opts.source ?? 'api';
    const ids = [...new Set(tokenIds)];
    const queued = await this.d.tasks.queuedFor(projectId, chain.chainId, contract, ids);
    const queuedTasks = new Set(queued.values());
    if (ids.length > 0 && queued.size === ids.length && queuedTasks.size === 1) {
      return { taskId: [...queuedTasks][0], joined: true };
    }
    // On-chain events and collection edits are explicit signals: the cool-off protects origins from API callers only.
    const coolOff = source === 'watcher' || source === 'collections' ? 0 : this.d.config.refresh.coolOffSec;
    const recent = await this.d.tasks.recentlyDone(projectId, chain.chainId, contract, ids, coolOff);
    const fresh = ids.filter((id) => !recent.has(id));
    if (ids.length > 0 && fresh.length === 0) return { taskId: Math.max(...recent.values()), joined: true };
    await this.checkQuota(projectId, fresh.length);
    const task = await this.d.tasks.create({
      projectId,
      kind: 'tokens',
      chainId: chain.chainId,
      contract,
      items: fresh.map((item) => ({ item, contract })),
      priority: this.priorityFor(fresh.length, source),
      source,
    });
    return { taskId: task.id, joined: false };
  }

  /**
   * Every token of the contract (or only those never seen, `onlyNew`), listed by a worker. A like
   * refreshAll still waiting to list the tokens is returned instead of a second one, and a project
   * whose queue is full cannot add one.
   */
  async enqueueAllTokens(projectId: number | null, chain: ChainClient, contract: Address, opts: { onlyNew?: boolean; source?: string } = {}): Promise<Enqueued> {
    const pending = await this.d.tasks.pendingRefreshAll(projectId, chain.chainId, contract, !!opts.onlyNew);
    if (pending !== null) return { taskId: pending, joined: true };
    await this.checkQuota(projectId, 1);
    const task = await this.d.tasks.create({
      projectId,
      kind: 'tokens',
      chainId: chain.chainId,
      contract,
      items: [],
      refreshAll: true,
      onlyNew: !!opts.onlyNew,
      priority: LARGE_TASK_PRIORITY,
      source: opts.source ?? 'api',
    });
    return { taskId: task.id, joined: false };
  }

  async enqueueContracts(projectId: number | null, chain: ChainClient, addresses: Address[]): Promise<Enqueued> {
    const unique = [...new Set(addresses)];
    const task = await this.d.tasks.create({
      projectId,
      kind: 'contracts',
      chainId: chain.chainId,
      contract: null,
      items: unique.map((a) => ({ item: a, contract: a })),
      priority: 0,
    });
    return { taskId: task.id, joined: false };
  }

  /** A task as its project sees it: another project's task is not found, never shown. */
  async taskFor(projectId: number | null, taskId: number): Promise<TaskRow> {
    const t = await this.d.tasks.get(taskId);
    if (!t || t.project_id !== projectId) throw new TaskNotFoundError(`task ${taskId} not found`);
    return t;
  }

  async result(projectId: number | null, taskId: number) {
    const task = await this.taskFor(projectId, taskId);
    const items = await this.d.tasks.items(taskId);
    const tokens: Record<string, boolean> = {};
    const failureReasons: Record<string, string> = {};
    for (const i of items) {
      if (i.status === 'DONE') tokens[i.item] = true;
      else if (i.status === 'FAILED' || i.status === 'CANCELLED') {
        tokens[i.item] = false;
        failureReasons[i.item] = i.failure_reason ?? i.status;
      }
    }
    return { task, items, tokens, failureReasons };
  }

  async cancel(projectId: number | null, taskId: number): Promise<boolean> {
    await this.taskFor(projectId, taskId);
    return this.d.tasks.cancel(taskId);
  }
}
