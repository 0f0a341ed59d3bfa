import type { Address } from 'viem';
import type { ChainClient } from '../../chain/client.ts';
import type { AppConfig } from '../../config/schema.ts';
import type { Queryable } from '../../store/db.ts';
import { RefreshLimitError, type RefreshService } from './refresh.ts';
import type { TaskRow, TaskStore } from './task-store.ts';

/** The contract is not in the caller's mint monitor, or its monitor has no job yet. */
export class MintMonitorNotFoundError extends Error {}
/** An address the monitor could never follow (no code there). */
export class MintMonitorArgumentError extends Error {}

/** The SQL of mint_monitors (migration 0050): this module alone writes the table. */
export function mintMonitorStore(db: Queryable) {
  return {
    /** Registers the contract unless the project already monitors `max` others; false when over the limit. */
    async add(projectId: number, chainId: number, contract: string, max: number): Promise<boolean> {
      // The count and the insert in one statement; adding a contract already monitored is no new one.
      const res = await db.query(
        `INSERT INTO mint_monitors (project_id, chain_id, contract_address)
         SELECT $1, $2, $3 WHERE (SELECT count(*) FROM mint_monitors WHERE project_id = $1) < $4
         ON CONFLICT DO NOTHING RETURNING 1`,
        [projectId, chainId, contract, max],
      );
      return res.rows.length > 0 || this.has(projectId, chainId, contract);
    },

    async has(projectId: number, chainId: number, contract: string): Promise<boolean> {
      const res = await db.query('SELECT 1 FROM mint_monitors WHERE project_id = $1 AND chain_id = $2 AND contract_address = $3', [projectId, chainId, contract]);
      return res.rows.length > 0;
    },

    async remove(projectId: number, chainId: number, contract: string): Promise<boolean> {
      const res = await db.query('DELETE FROM mint_monitors WHERE project_id = $1 AND chain_id = $2 AND contract_address = $3 RETURNING 1', [projectId, chainId, contract]);
      return res.rows.length > 0;
    },

    /** The project's monitor and its latest job's task id; null when it does not monitor the contract. */
    async get(projectId: number, chainId: number, contract: string): Promise<{ lastTaskId: number | null } | null> {
      const res = await db.query<{ last_task_id: string | number | null }>('SELECT last_task_id FROM mint_monitors WHERE project_id = $1 AND chain_id = $2 AND contract_address = $3', [
        projectId,
        chainId,
        contract,
      ]);
      const row = res.rows[0];
      return row ? { lastTaskId: row.last_task_id === null ? null : Number(row.last_task_id) } : null;
    },

    async setLastTask(projectId: number, chainId: number, contract: string, taskId: number): Promise<void> {
      await db.query('UPDATE mint_monitors SET last_task_id = $4 WHERE project_id = $1 AND chain_id = $2 AND contract_address = $3', [projectId, chainId, contract, taskId]);
    },

    /** Every contract of the chain some project monitors: what the watcher follows beside the contracts it knows. */
    async addresses(chainId: number): Promise<Address[]> {
      const res = await db.query<{ contract_address: string }>('SELECT DISTINCT contract_address FROM mint_monitors WHERE chain_id = $1', [chainId]);
      return res.rows.map((r) => r.contract_address as Address);
    },

    /** A chain that is new again (dev restarts its anvil): its contracts are other contracts now. */
    async forgetChain(chainId: number): Promise<void> {
      await db.query('DELETE FROM mint_monitors WHERE chain_id = $1', [chainId]);
    },
  };
}
export type MintMonitorStore = ReturnType<typeof mintMonitorStore>;

/**
 * The legacy mint monitor. A registration is the caller's project's: the watcher follows the mints of
 * every contract any project monitors (as it does for contracts the service knows), and each project
 * adds, removes, triggers and reads its own. A triggered job is a refresh of every token the contract
 * minted, a task of the project like RefreshAllContractTokens' (same queue, quota and visibility).
 */
export class MintMonitorService {
  constructor(private readonly d: { store: MintMonitorStore; tasks: TaskStore; refresh: RefreshService; config: AppConfig }) {}

  async add(projectId: number, chain: ChainClient, contract: Address): Promise<void> {
    // An address without code has no mints to follow; refusing it beats a registration that never does anything.
    const code = await chain.public.getCode({ address: contract });
    if (!code || code === '0x') throw new MintMonitorArgumentError(`no contract code at ${contract} on chain ${chain.name}`);
    const max = this.d.config.refresh.maxMintMonitorsPerProject;
    if (!(await this.d.store.add(projectId, chain.chainId, contract, max))) {
      throw new RefreshLimitError(`the project monitors ${max} contracts, the most refresh.maxMintMonitorsPerProject allows; remove one first`);
    }
  }

  async remove(projectId: number, chain: ChainClient, contract: Address): Promise<void> {
    if (!(await this.d.store.remove(projectId, chain.chainId, contract))) throw this.notMonitored(chain, contract);
  }

  /** Queues the scan of the contract's mints and the refresh of every token found; returns its task id. */
  async trigger(projectId: number, chain: ChainClient, contract: Address): Promise<number> {
    if (!(await this.d.store.get(projectId, chain.chainId, contract))) throw this.notMonitored(chain, contract);
    const { taskId } = await this.d.refresh.enqueueAllTokens(projectId, chain, contract, { source: 'mint-monitor' });
    await this.d.store.setLastTask(projectId, chain.chainId, contract, taskId);
    return taskId;
  }

  /** The task of the project's latest triggered job for the contract. */
  async status(projectId: number, chain: ChainClient, contract: Address): Promise<TaskRow> {
    const m = await this.d.store.get(projectId, chain.chainId, contract);
    if (!m) throw this.notMonitored(chain, contract);
    const task = m.lastTaskId === null ? null : await this.d.tasks.get(m.lastTaskId);
    if (!task) throw new MintMonitorNotFoundError(`no job has run for the mint monitor of ${contract} on chain ${chain.name}; MintMonitorTriggerJob starts one`);
    return task;
  }

  private notMonitored(chain: ChainClient, contract: Address): MintMonitorNotFoundError {
    return new MintMonitorNotFoundError(`contract ${contract} is not in this project's mint monitor on chain ${chain.name}`);
  }
}
