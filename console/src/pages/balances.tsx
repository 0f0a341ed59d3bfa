import { useState } from 'preact/hooks';
import { Amount, axisNative, exactNative, parseNative, readableNative, readableUsd, useUnits, type Unit } from '../amount.tsx';
import { api, short, when } from '../api.ts';
import { BarChart } from '../chart.tsx';
import { useAction, useApi } from '../hooks.ts';
import { Pager, TableWrap, usePaged, type Paged } from '../list.tsx';

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
  /** What the operator had paid so far for the project's meta-transactions sponsored without a balance. */
  paidWei: string;
}

interface Ledger extends Paged {
  entries: Entry[];
}

interface Day {
  day: string;
  spent: number;
  spentWei: string;
  spentUsd: number | null;
  transactions: number;
}

/** Spend per UTC day, one bar per day of the window (empty days included), in native units. */
function SpendChart({ days, window, unit }: { days: Day[]; window: number; unit: Unit }) {
  const byDay = new Map(days.map((d) => [d.day, d]));
  const today = new Date();
  const bars = Array.from({ length: window }, (_, i) => {
    const key = new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate() - (window - 1 - i))).toISOString().slice(0, 10);
    const d = byDay.get(key);
    return {
      key,
      value: d?.spent ?? 0,
      exact: d?.spentWei ?? '0',
      title: `${key}: ${d ? `${readableNative(d.spentWei)} ${unit.symbol}${d.spentUsd != null ? ` (${readableUsd(d.spentUsd)})` : ''}, ${d.transactions} meta-transactions` : 'nothing spent'}`,
    };
  });
  return <BarChart testid="spend-chart" bars={bars} unit={unit.symbol} format={axisNative} label="spend per day" />;
}

const KINDS = ['adjustment', 'debit', 'reversal'];

/**
 * An adjustment typed in native units or in dollars (converted at today's rate, shown as typed); a
 * leading minus withdraws.
 */
function adjustmentWei(text: string, unit: 'native' | 'usd', u: Unit): { wei: bigint } | { error: string } | null {
  const t = text.trim();
  if (!t) return null;
  const neg = t.startsWith('-') || t.startsWith('−');
  const body = neg ? t.slice(1).trim() : t;
  if (unit === 'native') {
    const wei = parseNative(body);
    return wei == null ? { error: `"${t}" is not an amount (at most 18 decimals)` } : { wei: neg ? -wei : wei };
  }
  if (!/^\d+(\.\d+)?$/.test(body)) return { error: `"${t}" is not a dollar amount` };
  if (!u.usdRate) return { error: 'no native/USD rate on this network: give the amount in native units' };
  const wei = BigInt(Math.round((Number(body) / u.usdRate) * 1e9)) * 10n ** 9n;
  return { wei: neg ? -wei : wei };
}

function NetworkPanel({ projectId, b, onChange }: { projectId: number; b: NetworkBalance; onChange: () => void }) {
  const [kind, setKind] = useState('');
  const ledger = usePaged<Ledger>('ListProjectLedger', { projectId, chainID: b.network, ...(kind ? { kind } : {}) }, 25);
  const spend = useApi<{ days: Day[] }>('ProjectSpendByDay', { projectId, chainID: b.network, days: 30 });
  const [amount, setAmount] = useState('');
  const [amountUnit, setAmountUnit] = useState<'native' | 'usd'>('native');
  const [note, setNote] = useState('');
  const a = useAction();
  const units = useUnits();
  const unit: Unit = { symbol: units.get(b.chainId)?.symbol ?? 'ETH', usdRate: b.usdRate };
  const parsed = adjustmentWei(amount, amountUnit, unit);
  const adjust = async (e: Event) => {
    e.preventDefault();
    if (!parsed || 'error' in parsed) return;
    // The identifier makes a double click (or a retried request) one adjustment.
    const identifier = note.trim() || `console-${Date.now()}`;
    const native = exactNative(parsed.wei).replace('−', '-');
    if (await a.run(() => api('AdjustProjectBalance', { projectId, chainID: b.network, amount: native, identifier }))) {
      setAmount('');
      setNote('');
      onChange();
      await Promise.all([ledger.reload(), spend.reload()]);
    }
  };
  const t = b.tank;
  const entries = ledger.data?.entries ?? [];
  // Without a tank the operator pays: the newest entry's running total says how much so far.
  const paid = entries[0]?.paidWei;
  return (
    <div class="stack card" data-testid={`balance-${b.network}`}>
      <h3>{b.network}</h3>
      {t ? (
        <p class="headline">
          Balance <Amount testid="balance-amount" wei={t.balanceWei} unit={unit} usd={t.balanceUsd} />
          {BigInt(t.heldWei) > 0n && (
            <>
              {' · held for meta-transactions in flight '}
              <Amount wei={t.heldWei} unit={unit} />
            </>
          )}
          <span class="hint">
            {' · '}
            {t.unlimited ? 'unlimited (debited, never stops sponsorship)' : 'limited: sponsorship stops at zero'}
            {t.feeMarkupFactor !== 1 && <> · markup ×{t.feeMarkupFactor}</>}
          </span>
        </p>
      ) : (
        <p class="headline" data-testid="no-tank">
          No balance is kept on this network: meta-transactions are sponsored by the project's rules and the operator pays
          {paid && paid !== '0' && kind === '' && ledger.atStart ? (
            <>
              {' — '}
              <Amount testid="operator-paid" wei={paid} unit={unit} /> so far
            </>
          ) : (
            ''
          )}
          . An adjustment below starts a balance.
        </p>
      )}
      <form class="row" onSubmit={adjust}>
        <span class="inline">
          <input data-testid="adjust-amount" class="num" placeholder="Amount (− withdraws)" value={amount} onInput={(e) => setAmount(e.currentTarget.value)} />
          <select data-testid="adjust-unit" value={amountUnit} onChange={(e) => setAmountUnit(e.currentTarget.value as 'native' | 'usd')} aria-label="Unit">
            <option value="native">{unit.symbol}</option>
            <option value="usd">USD</option>
          </select>
        </span>
        <input placeholder="Identifier (e.g. invoice number)" value={note} onInput={(e) => setNote(e.currentTarget.value)} />
        <button data-testid="adjust-balance" disabled={a.busy || !parsed || 'error' in parsed}>
          Adjust balance
        </button>
        <small data-testid="adjust-hint" class={parsed && 'error' in parsed ? 'error' : 'hint'}>
          {parsed &&
            ('error' in parsed
              ? parsed.error
              : `= ${exactNative(parsed.wei)} ${unit.symbol} = ${parsed.wei.toLocaleString('en-US')} wei${b.usdRate ? ` ≈ ${readableUsd((Number(parsed.wei) / 1e18) * b.usdRate)}` : ''}`)}
        </small>
      </form>
      {a.error && <p class="error">{a.error}</p>}
      <h4>Spend per day (last 30 days, UTC)</h4>
      {spend.data && <SpendChart days={spend.data.days} window={30} unit={unit} />}
      <h4>Ledger</h4>
      <div class="row">
        <select data-testid="ledger-kind" value={kind} onChange={(e) => setKind(e.currentTarget.value)} aria-label="Kind">
          <option value="">Every kind</option>
          {KINDS.map((k) => (
            <option value={k}>{k}</option>
          ))}
        </select>
        <Pager paged={ledger} shown={entries.length} testid="ledger" noun="entries" />
      </div>
      <TableWrap>
        <table data-testid="ledger" class="reflow">
          <thead>
            <tr>
              <th>When</th>
              <th>Kind</th>
              <th>Amount</th>
              <th>{t ? 'Balance after' : 'Balance after (operator paid so far)'}</th>
              <th>Meta-transaction / identifier</th>
              <th>Gas used</th>
            </tr>
          </thead>
          <tbody>
            {entries.map((e) => (
              <tr key={e.id}>
                <td data-label="When">{when(e.createdAt)}</td>
                <td data-label="Kind">{e.kind}</td>
                <td data-label="Amount">
                  <Amount wei={e.amountWei} unit={unit} usd={e.amountUsd} />
                </td>
                <td data-label="Balance after" data-testid="balance-after">
                  {e.balanceWei != null ? (
                    <Amount wei={e.balanceWei} unit={unit} />
                  ) : (
                    <span title="No balance was kept: the operator paid">
                      operator paid <Amount wei={e.paidWei} unit={unit} />
                    </span>
                  )}
                </td>
                <td data-label="Meta-transaction / identifier">
                  {e.metaTxnId ? <code title={e.metaTxnId}>{short(e.metaTxnId, 12)}</code> : (e.identifier ?? (e.nonce != null ? `nonce ${e.nonce}` : ''))}
                </td>
                <td data-label="Gas used">{e.gasUsed?.toLocaleString('en-US') ?? ''}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </TableWrap>
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
