import type { Address } from 'viem';
import type { ChainClient } from '../../chain/client.ts';
import type { AppConfig } from '../../config/schema.ts';
import type { Logger } from '../../telemetry/logger.ts';
import type { Metrics } from '../../telemetry/metrics.ts';
import type { ContractInfoService } from '../contracts/contracts.ts';
import { PollLoop } from '../../util/poll-loop.ts';
import { FailureStreak } from '../../util/failure-streak.ts';
import { enumerateTokens, startBlockOf } from './enumerate.ts';
import { isRetryable, type FetchFailureReason } from '../errors.ts';
import type { TokenMetadataService } from '../tokens/resolver.ts';
import type { ItemOutcome, TaskItem, TaskStore } from './task-store.ts';
import type { TokenStore } from '../tokens/token-store.ts';
import { ownerId } from '../../util/owner-id.ts';
import { askAgain, growing } from '../../util/ask-again.ts';

export interface WorkerDeps {
  tasks: TaskStore;
  tokens: TokenMetadataService;
  tokenStore: TokenStore;
  contracts: ContractInfoService;
  chains: ReadonlyMap<number, ChainClient>;
  config: AppConfig;
  log: Logger;
  metrics: Metrics;
}

const isContractItem = (item: string) => /^0x[0-9a-f]{40}$/.test(item);

/**
 * Takes refresh work from the shared queue. Several workers (processes) share it: claims skip
 * rows others hold, and a dead worker's leases run out so its items are taken over.
 */
export class TaskWorker {
  readonly owner = ownerId();
  private readonly loop: PollLoop;

  constructor(private readonly d: WorkerDeps) {
    this.loop = new PollLoop(
      async () => (await this.tick()) > 0,
      () => this.d.config.refresh.pollMs,
      new FailureStreak(this.d.log, 'refresh worker cycle'),
    );
  }

  start(): void {
    this.loop.start();
  }

  async stop(): Promise<void> {
    await this.loop.stop();
  }

  /** Ends the idle wait early (new work was just queued in this process). */
  nudge(): void {
    this.loop.wake();
  }

  /** One cycle: list the tokens of one refreshAll task, then process one batch of items. */
  async tick(): Promise<number> {
    const enumerated = await this.enumerateOne();
    const items = await this.d.tasks.claim(this.owner, this.d.config.refresh.claimBatch, this.d.config.refresh.leaseSec);
    const groups = new Map<string, TaskItem[]>();
    for (const i of items) {
      // Contract items of a chain go together (one batched read); tokens per contract.
      const k = isContractItem(i.item) ? `${i.chain_id}:contracts` : `${i.chain_id}:${i.contract_address}`;
      groups.set(k, [...(groups.get(k) ?? []), i]);
    }
    await Promise.all([...groups.values()].map((g) => this.process(g)));
    return items.length + enumerated;
  }

  private readonly failingBatches = new Map<number, FailureStreak>();

  private batchFailures(chain: ChainClient): FailureStreak {
    let f = this.failingBatches.get(chain.chainId);
    if (!f) this.failingBatches.set(chain.chainId, (f = new FailureStreak(this.d.log, 'refresh batches', { chain: chain.name }, () => !chain.health.ok)));
    return f;
  }

  private backoff(attempts: number, retryAfter?: Date | null): Date {
    const r = this.d.config.refresh;
    const ms = Math.min(r.backoffMaxMs, r.backoffBaseMs * 2 ** Math.max(0, attempts - 1));
    return new Date(Math.max(Date.now() + ms, retryAfter?.getTime() ?? 0));
  }

  private async process(group: TaskItem[]) {
    const { chain_id: chainId, contract_address: contract } = group[0];
    const chain = this.d.chains.get(chainId);
    const maxAttempts = this.d.config.refresh.maxAttempts;
    let outcomes: ItemOutcome[];
    if (!chain) {
      outcomes = group.map((i) => ({ taskId: i.task_id, item: i.item, contract: i.contract_address, ok: false, reason: 'CHAIN_NOT_CONFIGURED' }));
    } else {
      try {
        outcomes = isContractItem(group[0].item) ? await this.refreshContracts(chain, group) : await this.refreshTokens(chain, contract as Address, group);
        this.batchFailures(chain).succeeded();
      } catch (err) {
        // The chain or the database failed for the whole batch: every item tries again later. Logged
        // once while batches of this chain keep failing (a node down fails every one of them).
        this.batchFailures(chain).failed(err);
        outcomes = group.map((i) => ({
          taskId: i.task_id,
          item: i.item,
          contract: i.contract_address,
          ok: false,
          reason: 'UNREACHABLE',
          retryAt: i.attempts < maxAttempts ? this.backoff(i.attempts) : undefined,
        }));
      }
    }
    for (const o of outcomes) this.d.metrics.refreshItems.inc({ outcome: o.ok ? 'ok' : o.retryAt ? 'retry' : 'failed' });
    await this.record(chainId, outcomes);
  }

  /**
   * Records outcomes (which also moves the tasks' counts on and closes finished ones). A failed write,
   * such as a deadlock with another worker recording the same tasks, is tried again; should it keep
   * failing, the items stay leased to this worker and another claim takes them over after the lease.
   */
  private async record(chainId: number, outcomes: ItemOutcome[]): Promise<void> {
    await askAgain(
      () => this.d.tasks.complete(this.owner, chainId, outcomes),
      (err, attempt) => {
        this.d.log.warn({ err, attempt }, 'recording refresh outcomes failed; trying again');
        return true;
      },
      3,
      growing(100),
    );
  }

  private async refreshTokens(chain: ChainClient, contract: Address, group: TaskItem[]): Promise<ItemOutcome[]> {
    const ids = [...new Set(group.map((i) => i.item))];
    const records = await this.d.tokens.refresh(chain, contract, ids);
    // A record's retryAfter is when the serving path may try again: at least
    // metadata.failureRetrySec after the attempt, or the origin's Retry-After when that is longer.
    // Only the latter concerns a task, whose retries follow refresh.backoff*: so it counts only
    // when it lies beyond what failureRetrySec alone gives from now (the attempt ended by now).
    const serveRetryEnd = Date.now() + this.d.config.metadata.failureRetrySec * 1000;
    return group.map((i) => {
      const rec = records.get(i.item);
      if (rec && !rec.failureReason) return { taskId: i.task_id, item: i.item, contract, ok: true };
      const reason = rec?.failureReason ?? 'UNREACHABLE';
      const retry = isRetryable(reason as FetchFailureReason) && i.attempts < this.d.config.refresh.maxAttempts;
      const originRetryAt = rec?.retryAfter && rec.retryAfter.getTime() > serveRetryEnd ? rec.retryAfter : null;
      return { taskId: i.task_id, item: i.item, contract, ok: false, reason, retryAt: retry ? this.backoff(i.attempts, originRetryAt) : undefined };
    });
  }

  private async refreshContracts(chain: ChainClient, group: TaskItem[]): Promise<ItemOutcome[]> {
    const rows = await this.d.contracts.refresh(
      chain,
      group.map((i) => i.item as Address),
    );
    return group.map((i) => ({ taskId: i.task_id, item: i.item, contract: i.contract_address, ok: rows.has(i.item), reason: rows.has(i.item) ? undefined : 'NOT_FOUND' }));
  }

  private async enumerateOne(): Promise<number> {
    const task = await this.d.tasks.claimEnumeration(this.owner, this.d.config.refresh.leaseSec * 10);
    if (!task) return 0;
    const chain = this.d.chains.get(task.chain_id);
    if (!chain || !task.contract_address) {
      await this.d.tasks.failTask(task.id, `chain ${task.chain_id} is not configured`);
      return 1;
    }
    try {
      let ids = await enumerateTokens(chain, task.contract_address as Address, {
        logChunkBlocks: this.d.config.refresh.logChunkBlocks,
        startBlock: startBlockOf(this.d.config.chains.find((c) => c.chainId === chain.chainId)?.startBlocks, task.contract_address),
      });
      if (task.only_new) {
        const known = await this.d.tokenStore.get(chain.chainId, task.contract_address, ids);
        ids = ids.filter((id) => !known.get(id)?.metadata);
      }
      await this.d.tasks.finishEnumeration(
        task.id,
        ids.map((item) => ({ item, contract: task.contract_address! })),
        chain.chainId,
        task.priority,
      );
      await this.d.tasks.settle([task.id]);
    } catch (err) {
      this.d.log.warn({ err, task: task.id }, 'token enumeration failed');
      if (task.tries >= this.d.config.refresh.maxAttempts) await this.d.tasks.failTask(task.id, `enumeration failed: ${(err as Error).message.split('\n')[0]}`);
      else await this.d.tasks.releaseEnumeration(task.id, (err as Error).message.split('\n')[0]);
    }
    return 1;
  }
}
