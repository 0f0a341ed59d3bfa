import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { FailureStreak } from '../util/failure-streak.ts';
import { PollLoop } from '../util/poll-loop.ts';
import { readableNative } from '../util/units.ts';
import type { TankRepo } from './balances/index.ts';
import type { SponsorRepo, SponsorRule } from './intake/sponsors.ts';
import type { Cap } from './intake/policy.ts';

/*
 * Warnings before a limit is met: a sponsorship rule whose spend has reached a share of its daily cap
 * or total budget (past the cap its meta-transactions are refused), and a project balance that covers
 * only a few days of what the project has been spending (an empty balance refuses them too). The
 * console shows a project's alerts; the loop logs each alert once when it begins and once when it ends,
 * and keeps a gauge per kind.
 */

export interface AlertOptions {
  /** A cap's share spent from which a rule is flagged (0.8: 80 %). */
  capShare: number;
  /** A balance covering fewer days than this of the last 7 days' average spend is flagged. */
  tankRunwayDays: number;
  checkEverySec: number;
}

export interface Alert {
  /** Stable while the condition lasts: what the loop tells begun from ended by. */
  key: string;
  kind: 'sponsorCap' | 'gasTank';
  projectId: number;
  chainId: number;
  /** sponsorCap: the rule, and which cap; gasTank: null, 'balance'. */
  ruleId: number | null;
  limit: 'dailyCap' | 'totalBudget' | 'balance';
  /** sponsorCap: the share of the cap spent (1 or more: reached); gasTank: null. */
  share: number | null;
  /** gasTank: the days the balance lasts at the last 7 days' pace (0 when empty); sponsorCap: null. */
  runwayDays: number | null;
  message: string;
}

export interface AlertDeps {
  sponsors: Pick<SponsorRepo, 'capped'>;
  tanks: Pick<TankRepo, 'list' | 'ofProject' | 'cost'>;
  /** The relayed chains, with their names for the messages. */
  chains: ReadonlyMap<number, string>;
}

/** The larger of the two shares a cap can be spent by (wei and dollars); null without the cap. */
function shareOf(cap: Cap, spentWei: bigint, spentUsd: bigint): number | null {
  const shares = [
    cap.wei != null && cap.wei > 0n ? Number((spentWei * 10_000n) / cap.wei) / 10_000 : null,
    cap.usd != null && cap.usd > 0n ? Number((spentUsd * 10_000n) / cap.usd) / 10_000 : null,
  ].filter((x): x is number => x !== null);
  return shares.length ? Math.max(...shares) : null;
}

const percent = (share: number) => `${Math.floor(share * 100)}%`;

function capAlerts(rule: SponsorRule, o: AlertOptions, chain: string): Alert[] {
  if (rule.projectId == null) return [];
  const out: Alert[] = [];
  const caps = [
    ['dailyCap', 'daily cap', rule.policy.dailyCap, rule.spent.todayWei, rule.spent.todayUsd],
    ['totalBudget', 'total budget', rule.policy.totalBudget, rule.spent.totalWei, rule.spent.totalUsd],
  ] as const;
  for (const [limit, words, cap, wei, usd] of caps) {
    const share = shareOf(cap, wei, usd);
    if (share == null || share < o.capShare) continue;
    out.push({
      key: `cap:${rule.id}:${limit}`,
      kind: 'sponsorCap',
      projectId: rule.projectId,
      chainId: rule.chainId,
      ruleId: rule.id,
      limit,
      share,
      runwayDays: null,
      message: `sponsorship ${rule.id} (${rule.kind}${rule.name ? ` ${rule.name}` : ''}) on ${chain} has spent ${percent(share)} of its ${words}${share >= 1 ? ': what it covers is refused' : ''}`,
    });
  }
  return out;
}

const WEEK_MS = 7 * 86_400_000;

async function tankAlert(deps: AlertDeps, o: AlertOptions, t: { projectId: number | null; chainId: number; unlimited: boolean; balanceWei: bigint }, now: Date): Promise<Alert | null> {
  if (t.projectId == null || t.unlimited) return null;
  const chain = deps.chains.get(t.chainId) ?? String(t.chainId);
  const base = { key: `tank:${t.projectId}:${t.chainId}`, kind: 'gasTank' as const, projectId: t.projectId, chainId: t.chainId, ruleId: null, limit: 'balance' as const, share: null };
  if (t.balanceWei <= 0n) return { ...base, runwayDays: 0, message: `the project's balance on ${chain} is empty: its sponsored meta-transactions are refused` };
  const { chargedWei } = await deps.tanks.cost(t.projectId, t.chainId, new Date(now.getTime() - WEEK_MS), now);
  if (chargedWei <= 0n) return null;
  // Days left at the week's pace: balance / (charged / 7).
  const days = Number((t.balanceWei * 7n * 100n) / chargedWei) / 100;
  if (days >= o.tankRunwayDays) return null;
  return { ...base, runwayDays: days, message: `the project's balance on ${chain} (${readableNative(t.balanceWei)} ETH) lasts about ${days.toFixed(1)} days at the last 7 days' spend` };
}

/** The alerts of one project (null: of every project) now. */
export async function currentAlerts(deps: AlertDeps, o: AlertOptions, projectId: number | null, now = new Date()): Promise<Alert[]> {
  const rules = await deps.sponsors.capped(projectId);
  const out = rules.filter((r) => deps.chains.has(r.chainId)).flatMap((r) => capAlerts(r, o, deps.chains.get(r.chainId)!));
  for (const chainId of deps.chains.keys()) {
    const tanks = projectId == null ? await deps.tanks.list(chainId) : [await deps.tanks.ofProject(projectId, chainId)].filter((t) => t !== undefined);
    for (const t of tanks) {
      const a = await tankAlert(deps, o, t!, now);
      if (a) out.push(a);
    }
  }
  return out;
}

/** The background check: each alert logged once as it begins (warn) and once as it ends (info), a gauge per kind. */
export class AlertWatch {
  private readonly loop: PollLoop;
  private active = new Map<string, Alert>();

  constructor(
    private readonly deps: AlertDeps,
    private readonly o: AlertOptions,
    private readonly log: Logger,
    private readonly metrics?: Metrics,
  ) {
    this.loop = new PollLoop(
      () => this.check(),
      () => o.checkEverySec * 1000,
      new FailureStreak(log, 'alert check'),
    );
  }

  async check(): Promise<void> {
    const now = await currentAlerts(this.deps, this.o, null);
    const next = new Map(now.map((a) => [a.key, a]));
    for (const [key, a] of next) {
      if (this.active.has(key)) continue;
      this.metrics?.alertsRaised.inc({ kind: a.kind });
      this.log.warn({ alert: a.kind, projectId: a.projectId, chainId: a.chainId, ruleId: a.ruleId, limit: a.limit, share: a.share, runwayDays: a.runwayDays }, `alert: ${a.message}`);
    }
    for (const [key, a] of this.active) {
      if (!next.has(key))
        this.log.info(
          { alert: a.kind, projectId: a.projectId, chainId: a.chainId, ruleId: a.ruleId, limit: a.limit },
          `alert ended: ${a.kind === 'sponsorCap' ? `sponsorship ${a.ruleId}'s ${a.limit === 'dailyCap' ? 'daily cap' : 'total budget'}` : `the project's balance on chain ${a.chainId}`} is no longer near its limit`,
        );
    }
    this.active = next;
    for (const kind of ['sponsorCap', 'gasTank'] as const) this.metrics?.alertsActive.set({ kind }, now.filter((a) => a.kind === kind).length);
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }
}
