import { useState } from 'preact/hooks';
import { axisNative, readableNative, readableUsd, usdOfWei, useUnits, NO_UNIT } from '../amount.tsx';
import { BarChart, StackedChart, type Series } from '../chart.tsx';
import { useApi } from '../hooks.ts';

interface Usage {
  days: string[];
  families: string[];
  keys: { id: number; label: string; prefix: string; revoked: boolean }[];
  requests: { day: string; keyId: number; family: string; requests: number }[];
  networks: { chainId: number; network: string; usdRate: number | null }[];
  metaTxns: { day: string; chainId: number; status: string; txns: number; sponsored: number; gasUsed: string; costWei: string; cost: number; costUsd: number | null; feeWei: string }[];
  /** The project's balance at each day's end, on the networks where it has one (null: none yet that day). */
  tanks: { chainId: number; days: { day: string; balanceWei: string | null }[] }[];
}

const FAMILY_COLORS: Record<string, string> = { metadata: '#3b6fd8', relayer: '#2a9d6f', indexer: '#d9892b', other: '#8a94a6' };
const STATUSES: Series[] = [
  { key: 'SUCCEEDED', label: 'succeeded', color: '#2a9d6f' },
  { key: 'PARTIALLY_FAILED', label: 'partially failed', color: '#e0a23c' },
  { key: 'FAILED', label: 'failed', color: '#d0453b' },
  { key: 'DROPPED', label: 'dropped', color: '#8a94a6' },
  { key: 'SENT', label: 'sent', color: '#3b6fd8' },
  { key: 'QUEUED', label: 'queued', color: '#b9c3d3' },
  { key: 'PENDING_PRECONDITION', label: 'waiting', color: '#9b6bd8' },
];
const FINAL = new Set(['SUCCEEDED', 'PARTIALLY_FAILED', 'FAILED', 'DROPPED']);

const count = (v: number) => (v >= 1000 ? `${Number((v / 1000).toPrecision(2))}k` : String(v));

/**
 * A project over the last 30 UTC days, from the server's hourly roll-ups: requests per day by method
 * family (all keys or one), meta-transactions per day by status, the success rate of those finished,
 * gas used and what they cost in native units and dollars, and the balance at each day's end, per network.
 */
export function Overview({ projectId }: { projectId: number }) {
  const u = useApi<Usage>('ProjectUsage', { projectId, days: 30 });
  const units = useUnits();
  const [keyId, setKeyId] = useState('');
  const [chain, setChain] = useState('');
  if (u.error) return <p class="error">{u.error}</p>;
  if (!u.data) return <p>Loading…</p>;
  const d = u.data;
  const chainId = Number(chain) || d.networks[0]?.chainId;
  const net = d.networks.find((n) => n.chainId === chainId);
  const unit = { ...(units.get(chainId) ?? NO_UNIT), usdRate: net?.usdRate ?? null };

  const families: Series[] = d.families.map((f) => ({ key: f, label: f, color: FAMILY_COLORS[f] }));
  const reqs = d.requests.filter((r) => !keyId || r.keyId === Number(keyId));
  const requestStacks = d.days.map((day) => {
    const values = families.map((f) => reqs.filter((r) => r.day === day && r.family === f.key).reduce((n, r) => n + r.requests, 0));
    const parts = families.map((f, i) => (values[i] ? `${f.label} ${values[i]}` : '')).filter(Boolean);
    return { key: day, values, title: `${day}: ${parts.length ? parts.join(', ') : 'no requests'}` };
  });

  const txns = d.metaTxns.filter((m) => m.chainId === chainId);
  const ofDay = (day: string) => txns.filter((m) => m.day === day);
  const statusStacks = d.days.map((day) => {
    const rows = ofDay(day);
    const values = STATUSES.map((s) => rows.filter((m) => m.status === s.key).reduce((n, m) => n + m.txns, 0));
    const parts = STATUSES.map((s, i) => (values[i] ? `${s.label} ${values[i]}` : '')).filter(Boolean);
    return { key: day, values, title: `${day}: ${parts.length ? parts.join(', ') : 'no meta-transactions'}` };
  });
  const success = d.days.map((day) => {
    const rows = ofDay(day);
    const fin = rows.filter((m) => FINAL.has(m.status)).reduce((n, m) => n + m.txns, 0);
    const ok = rows.filter((m) => m.status === 'SUCCEEDED').reduce((n, m) => n + m.txns, 0);
    const pct = fin ? Math.round((ok / fin) * 1000) / 10 : 0;
    return { key: day, value: pct, exact: fin ? String(pct) : '', title: fin ? `${day}: ${pct}% (${ok} of ${fin} finished)` : `${day}: none finished` };
  });
  const gas = d.days.map((day) => {
    const g = ofDay(day).reduce((n, m) => n + BigInt(m.gasUsed), 0n);
    return { key: day, value: Number(g), exact: g.toString(), title: `${day}: ${g.toLocaleString('en-US')} gas` };
  });
  const spend = d.days.map((day) => {
    const rows = ofDay(day);
    const wei = rows.reduce((n, m) => n + BigInt(m.costWei), 0n);
    const usd = rows.some((m) => m.costUsd != null) ? rows.reduce((n, m) => n + (m.costUsd ?? 0), 0) : null;
    const n = rows.reduce((k, m) => k + m.txns, 0);
    return {
      key: day,
      value: Number(wei) / 1e18,
      exact: wei.toString(),
      title: `${day}: ${readableNative(wei)} ${unit.symbol}${usd != null ? ` (${readableUsd(usd)})` : ''}, ${n} meta-transactions`,
    };
  });

  const tank = d.tanks.find((t) => t.chainId === chainId);
  const balances = tank?.days.map((x) => {
    const wei = x.balanceWei == null ? null : BigInt(x.balanceWei);
    const usd = wei == null ? null : usdOfWei(wei, unit.usdRate);
    return {
      key: x.day,
      value: wei == null || wei < 0n ? 0 : Number(wei) / 1e18,
      exact: x.balanceWei ?? '',
      title: wei == null ? `${x.day}: no balance yet` : `${x.day}: ${readableNative(wei)} ${unit.symbol}${usd != null ? ` (${readableUsd(usd)})` : ''} at the day's end`,
    };
  });

  const totalReqs = reqs.reduce((n, r) => n + r.requests, 0);
  const totalTx = txns.reduce((n, m) => n + m.txns, 0);
  const fin = txns.filter((m) => FINAL.has(m.status)).reduce((n, m) => n + m.txns, 0);
  const ok = txns.filter((m) => m.status === 'SUCCEEDED').reduce((n, m) => n + m.txns, 0);
  const costWei = txns.reduce((n, m) => n + BigInt(m.costWei), 0n);
  const costUsd = txns.some((m) => m.costUsd != null) ? txns.reduce((n, m) => n + (m.costUsd ?? 0), 0) : null;

  return (
    <div class="overview" data-testid="overview">
      <div class="row filters">
        <select data-testid="overview-key" value={keyId} onChange={(e) => setKeyId(e.currentTarget.value)} aria-label="Access key">
          <option value="">All keys</option>
          {d.keys.map((k) => (
            <option value={String(k.id)}>
              {k.label || `${k.prefix}…`}
              {k.revoked ? ' (revoked)' : ''}
            </option>
          ))}
        </select>
        {d.networks.length > 1 && (
          <select data-testid="overview-network" value={String(chainId)} onChange={(e) => setChain(e.currentTarget.value)} aria-label="Network">
            {d.networks.map((n) => (
              <option value={String(n.chainId)}>{n.network}</option>
            ))}
          </select>
        )}
        <span class="hint">last 30 days (UTC){net ? `, meta-transactions on ${net.network}` : ''}</span>
      </div>
      <div class="totals" data-testid="overview-totals">
        <span>
          <b data-testid="total-requests">{totalReqs.toLocaleString('en-US')}</b> requests
        </span>
        <span>
          <b data-testid="total-metatxns">{totalTx.toLocaleString('en-US')}</b> meta-transactions
        </span>
        <span>
          <b>{fin ? `${Math.round((ok / fin) * 1000) / 10}%` : '—'}</b> succeeded
        </span>
        <span>
          <b data-testid="total-spend" data-wei={costWei.toString()}>
            {readableNative(costWei)} {unit.symbol}
          </b>
          spent{costUsd != null ? ` · ${readableUsd(costUsd)}` : ''}
        </span>
      </div>
      <div class="charts">
        <div>
          <h3>Requests per day by method family</h3>
          <StackedChart testid="requests-chart" stacks={requestStacks} series={families} unit="requests" format={count} label="requests per day by method family" />
        </div>
        <div>
          <h3>Meta-transactions per day by status</h3>
          <StackedChart testid="metatxns-chart" stacks={statusStacks} series={STATUSES} unit="meta-txns" format={count} label="meta-transactions per day by status" />
        </div>
        <div>
          <h3>Success rate (of those finished)</h3>
          <BarChart testid="success-chart" bars={success} unit="%" format={(v) => String(v)} label="success rate per day" />
        </div>
        <div>
          <h3>Gas used per day</h3>
          <BarChart testid="gas-chart" bars={gas} unit="gas" format={count} label="gas used per day" />
        </div>
        <div>
          <h3>Spend per day{unit.usdRate != null ? ` (${unit.symbol}, dollars in the tooltip)` : ''}</h3>
          <BarChart testid="usage-spend-chart" bars={spend} unit={unit.symbol} format={axisNative} label="spend per day" />
        </div>
        {balances && (
          <div>
            <h3>Balance at each day's end{unit.usdRate != null ? ` (${unit.symbol}, dollars in the tooltip)` : ''}</h3>
            <BarChart testid="tank-chart" bars={balances} unit={unit.symbol} format={axisNative} label="balance at each day's end" />
          </div>
        )}
      </div>
    </div>
  );
}
