import type { ProjectRequest, ProjectRequestRepo } from '../store/project-requests.ts';
import { failureLevel } from '../store/outage.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';

export interface RequestJournalOptions {
  enabled: boolean;
  keepPerProject: number;
  flushMs: number;
  maxPending: number;
}

/**
 * Each project's recent requests for the console's request log. A request costs a push onto an array;
 * the rows are written in one INSERT every `flushMs` (and the table cut to the newest `keepPerProject`
 * per project written to). At most `maxPending` wait: past that, and when a write fails, rows are
 * dropped and counted, never retried (a log of recent requests is worth less than the heap).
 */
export class RequestJournal {
  private pending: ProjectRequest[] = [];
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly repo: ProjectRequestRepo,
    private readonly log: Logger,
    private readonly opts: RequestJournalOptions,
    private readonly metrics?: Metrics,
  ) {
    metrics?.requestLogLimit.set({ limit: 'keepPerProject' }, opts.keepPerProject);
    metrics?.requestLogLimit.set({ limit: 'maxPending' }, opts.maxPending);
  }

  note(r: ProjectRequest): void {
    if (!this.opts.enabled) return;
    if (this.pending.length >= this.opts.maxPending) {
      this.metrics?.requestLogRows.inc({ outcome: 'dropped' });
      return;
    }
    this.pending.push(r);
    if (!this.timer) {
      this.timer = setTimeout(() => void this.flush(), this.opts.flushMs);
      this.timer.unref?.();
    }
  }

  /** Writes what waits (after any write in progress); resolves once it is written or dropped. */
  flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const batch = newestPerProject(this.pending, this.opts.keepPerProject);
    this.pending = [];
    this.writing = this.writing.then(async () => {
      if (batch.length === 0) return;
      try {
        await this.repo.append(batch, this.opts.keepPerProject);
        this.metrics?.requestLogRows.inc({ outcome: 'written' }, batch.length);
      } catch (err) {
        this.metrics?.requestLogRows.inc({ outcome: 'dropped' }, batch.length);
        this.log[failureLevel(err)]({ err, rows: batch.length }, 'could not write the request log');
      }
    });
    return this.writing;
  }
}

/**
 * The rows worth writing: a busy project's older rows in a batch would be cut by the same flush's prune,
 * so only its newest `keep` are inserted (a project at thousands of requests a second costs `keep` rows a
 * flush, not thousands).
 */
export function newestPerProject(rows: readonly ProjectRequest[], keep: number): ProjectRequest[] {
  const seen = new Map<number, number>();
  const out: ProjectRequest[] = [];
  for (let i = rows.length - 1; i >= 0; i--) {
    const n = seen.get(rows[i].projectId) ?? 0;
    if (n >= keep) continue;
    seen.set(rows[i].projectId, n + 1);
    out.push(rows[i]);
  }
  return out.reverse();
}
