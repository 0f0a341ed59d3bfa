import { useState } from 'preact/hooks';
import { api, short, when } from '../api.ts';
import { useAction, useApi } from '../hooks.ts';

interface Tank {
  id: number;
  currentBalance: number;
  balanceWei: string;
  heldWei: string;
  availableWei: string;
  balanceUsd: number | null;
  unlimited: boolean;
  feeMarkupFactor: number;
}

interface NetworkBalance {
  chainId: number;
  network: string;
  limited: boolean;
  tank: Tank | null;
  usdRate: number | null;
}

interface Entry {
  id: number;
  kind: 'adjustment' | 'debit' | 'reversal';
  amount: number;
  amountWei: string;
  balanceWei: string | null;
  amountUsd: number | null;
  identifier: string | null;
  nonce: number | null;
  metaTxnId: string | null;
  txnHash: string | null;
  gasUsed: number | null;
  createdAt: string;
}

interface Day {
  day: string;
  spent: number;
  spentWei: string;
  spentUsd: number | null;
  transactions: number;
}

const eth = (wei: string | null) => {
  if (wei == null) return '—';
  const v = BigInt(wei);
  const neg = v < 0n;
  const a = neg ? -v : v;
  const frac = (a % 10n ** 18n).toString().padStart(18, '0').replace(/0+$/, '');
  return `${neg ? '−' : ''}${a / 10n ** 18n}${frac ? `.${frac}` : ''}`;
};
const usd = (v: number | null) => (v == null ? '' : `$${v.toLocaleString(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`);

/** Spend per UTC day as an SVG bar chart: one bar per day of the window, empty days included. */
function SpendChart({ days, window }: { days: Day[]; window: number }) {
  const byDay = new Map(days.map((d) => [d.day, d]));
  const today = new Date();
  const cells = Array.from({ length: window }, (_, i) => {
    const d = new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate() - (window - 1 - i)));
    const key = d.toISOString().slice(0, 10);
    return { key, d: byDay.get(key) };
  });
  const max = Math.max(...cells.map((c) => c.d?.spent ?? 0), 0);
  const w = 12;
  const h = 80;
  return (
    <svg data-testid="spend-chart" class="spend-chart" width={window * w} height={h + 14} viewBox={`0 0 ${window * w} ${h + 14}`} role="img" aria-label="spend per day">
      {cells.map((c, i) => {
        const bh = max > 0 && c.d ? Math.max(1, (c.d.spent / max) * h) : 0;
        return (
          <rect x={i * w + 1} y={h - bh} width={w - 2} height={bh} fill="#3b6fd8">
            <title>{`${c.key}: ${c.d ? `${eth(c.d.spentWei)} ${usd(c.d.spentUsd)} (${c.d.transactions} transactions)` : 'nothing'}`}</title>
          </rect>
        );
      })}
      <line x1="0" y1={h} x2={window * w} y2={h} stroke="#999" />
      <text x="0" y={h + 12} font-size="10">
        {cells[0].key}
      </text>
      <text x={window * w} y={h + 12} font-size="10" text-anchor="end">
        {cells[window - 1].key}
      </text>
    </svg>
  );
}

function NetworkPanel({ projectId, b, onChange }: { projectId: number; b: NetworkBalance; onChange: () => void }) {
  const ledger = useApi<{ entries: Entry[] }>('ListProjectLedger', { projectId, chainID: b.network });
  const spend = useApi<{ days: Day[] }>('ProjectSpendByDay', { projectId, chainID: b.network, days: 30 });
  const [amount, setAmount] = useState('');
  const [note, setNote] = useState('');
  const a = useAction();
  const adjust = async (e: Event) => {
    e.preventDefault();
    // The identifier makes a double click (or a retried request) one adjustment.
    const identifier = note.trim() || `console-${Date.now()}`;
    if (await a.run(() => api('AdjustProjectBalance', { projectId, chainID: b.network, amount: amount.trim(), identifier }))) {
      setAmount('');
      setNote('');
      onChange();
      await Promise.all([ledger.reload(), spend.reload()]);
    }
  };
  const t = b.tank;
  return (
    <div class="stack" data-testid={`balance-${b.network}`}>
      <h3>{b.network}</h3>
      <p>
        Balance <strong data-testid="balance-amount">{eth(t?.balanceWei ?? '0')}</strong> {usd(t?.balanceUsd ?? null)}
        {t && BigInt(t.heldWei) > 0n && <> · held for meta-transactions in flight {eth(t.heldWei)}</>}
        {' · '}
        {!t ? 'no balance: sponsored by its rules, the operator pays' : t.unlimited ? 'unlimited (debited, never stops sponsorship)' : 'limited: sponsorship stops at zero'}
        {t && t.feeMarkupFactor !== 1 && <> · markup ×{t.feeMarkupFactor}</>}
      </p>
      <form class="row" onSubmit={adjust}>
        <input data-testid="adjust-amount" class="num" placeholder="Amount (native, − to withdraw)" value={amount} onInput={(e) => setAmount(e.currentTarget.value)} />
        <input placeholder="Identifier (e.g. invoice number)" value={note} onInput={(e) => setNote(e.currentTarget.value)} />
        <button data-testid="adjust-balance" disabled={a.busy || !amount.trim()}>
          Adjust balance
        </button>
      </form>
      {a.error && <p class="error">{a.error}</p>}
      <h4>Spend per day (last 30 days, UTC)</h4>
      {spend.data && <SpendChart days={spend.data.days} window={30} />}
      <h4>Ledger</h4>
      <table data-testid="ledger">
        <thead>
          <tr>
            <th>When</th>
            <th>Kind</th>
            <th>Amount</th>
            <th>USD then</th>
            <th>Balance after</th>
            <th>Meta-transaction / identifier</th>
            <th>Gas used</th>
          </tr>
        </thead>
        <tbody>
          {ledger.data?.entries.map((e) => (
            <tr key={e.id}>
              <td>{when(e.createdAt)}</td>
              <td>{e.kind}</td>
              <td>{eth(e.amountWei)}</td>
              <td>{usd(e.amountUsd)}</td>
              <td>{eth(e.balanceWei)}</td>
              <td>{e.metaTxnId ? <code title={e.metaTxnId}>{short(e.metaTxnId, 12)}</code> : (e.identifier ?? (e.nonce != null ? `nonce ${e.nonce}` : ''))}</td>
              <td>{e.gasUsed ?? ''}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** A project's balance on each relayed network: adjust it, see its ledger and what it spent per day. */
export function Balances({ projectId }: { projectId: number }) {
  const list = useApi<{ balances: NetworkBalance[] }>('GetProjectBalances', { projectId });
  if (list.error) return <p class="error">{list.error}</p>;
  if (!list.data) return <p>Loading…</p>;
  if (list.data.balances.length === 0) return <p>No network has a relayer.</p>;
  return (
    <div class="stack">
      {list.data.balances.map((b) => (
        <NetworkPanel key={b.chainId} projectId={projectId} b={b} onChange={list.reload} />
      ))}
    </div>
  );
}
