import { useState } from 'preact/hooks';
import { Amount, GasPrice, NO_UNIT, feeText, grouped, useFeeTokens, useUnits, type Unit } from '../amount.tsx';
import { short, when } from '../api.ts';
import { useApi } from '../hooks.ts';
import { Pager, TableWrap, usePaged, type Paged } from '../list.tsx';
import '../readable.css';

interface MetaTxn {
  chainId: number;
  network: string;
  metaTxnID: string;
  txnHash: string;
  txnStatus: string;
  txnRevertReason: string;
  walletAddress: string;
  gasUsed: number;
  gasPrice: string;
  cost: string;
  isWhitelisted: boolean;
  feeToken: string | null;
  feeValue: string | null;
  queuedAt: string;
  minedAt: string | null;
}

const STATUSES = ['PENDING_PRECONDITION', 'QUEUED', 'SENT', 'SUCCEEDED', 'PARTIALLY_FAILED', 'FAILED', 'DROPPED'];
const PAGE = 25;

interface ActivityPage extends Paged {
  transactions: MetaTxn[];
  counts: Record<string, number>;
}

interface KeyChoice {
  id: number;
  prefix: string;
  label: string;
}

/** The day after a YYYY-MM-DD (the "to" date is inclusive on the page, exclusive in the API). */
const dayAfter = (d: string) => new Date(Date.parse(`${d}T00:00:00Z`) + 86_400_000).toISOString().slice(0, 10);

/** A project's meta-transactions: filtered by status, wallet, key and date, counted, a page at a time. */
export function Activity({ projectId }: { projectId: number }) {
  const units = useUnits();
  const tokens = useFeeTokens();
  const keys = useApi<{ accessKeys: KeyChoice[] }>('ListAccessKeys', { projectId, pageSize: 200 });
  const [f, setF] = useState({ status: '', wallet: '', keyId: '', from: '', to: '' });
  const set = (k: keyof typeof f) => (e: Event) => setF({ ...f, [k]: (e.currentTarget as HTMLInputElement).value });
  const wallet = f.wallet.trim();
  const walletOk = wallet === '' || /^0x[0-9a-fA-F]{40}$/.test(wallet);
  const args: Record<string, unknown> = { projectId };
  if (f.status) args.status = f.status;
  if (wallet && walletOk) args.wallet = wallet;
  if (f.keyId) args.keyId = Number(f.keyId);
  if (f.from) args.from = f.from;
  if (f.to) args.to = dayAfter(f.to);
  const list = usePaged<ActivityPage>('GetMetaTransactions', args, PAGE);
  const rows = list.data?.transactions ?? [];
  const counts = list.data?.counts ?? {};
  const all = Object.values(counts).reduce((a, b) => a + b, 0);
  return (
    <div>
      <form class="row filters" data-testid="activity-filters" onSubmit={(e) => e.preventDefault()}>
        <select data-testid="filter-status" value={f.status} onChange={set('status')} aria-label="Status">
          <option value="">Every status ({all})</option>
          {STATUSES.map((st) => (
            <option value={st}>
              {st} ({counts[st] ?? 0})
            </option>
          ))}
        </select>
        <input data-testid="filter-wallet" class="addr" placeholder="Wallet 0x…" value={f.wallet} onInput={set('wallet')} aria-invalid={!walletOk} />
        <select data-testid="filter-key" value={f.keyId} onChange={set('keyId')} aria-label="Access key">
          <option value="">Every key</option>
          {keys.data?.accessKeys.map((k) => (
            <option value={String(k.id)}>
              {k.label || 'no label'} ({k.prefix}…)
            </option>
          ))}
        </select>
        <label>
          From <input type="date" data-testid="filter-from" value={f.from} onInput={set('from')} />
        </label>
        <label>
          To <input type="date" data-testid="filter-to" value={f.to} onInput={set('to')} />
        </label>
        <button type="button" class="secondary" onClick={list.reload} data-testid="refresh-activity">
          Refresh
        </button>
      </form>
      {!walletOk && <p class="error">The wallet is not a 0x address of 40 hex digits.</p>}
      {list.error && <p class="error">{list.error}</p>}
      <Pager paged={list} shown={rows.length} testid="activity" noun="meta-transactions" />
      <TableWrap>
        <table data-testid="activity" class="reflow compact">
          <thead>
            <tr>
              <th>Meta-transaction</th>
              <th>Network</th>
              <th>Status</th>
              <th>Wallet</th>
              <th>Transaction</th>
              <th>Paid by</th>
              <th>Gas used</th>
              <th>Cost</th>
              <th>Queued</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((t) => (
              <tr key={t.metaTxnID} data-testid={`tx-${t.metaTxnID}`}>
                <td data-label="Meta-transaction">
                  <a href={`#/projects/${projectId}/tx/${t.chainId}:${t.metaTxnID}`}>
                    <code>{short(t.metaTxnID)}</code>
                  </a>
                </td>
                <td data-label="Network">{t.network}</td>
                <td data-label="Status" class={`status ${t.txnStatus}`} data-testid="tx-status">
                  {t.txnStatus}
                </td>
                <td data-label="Wallet">
                  <code title={t.walletAddress}>{short(t.walletAddress)}</code>
                </td>
                <td data-label="Transaction" class="minor">
                  <code title={t.txnHash}>{short(t.txnHash)}</code>
                </td>
                <td data-label="Paid by" class="minor">
                  {t.isWhitelisted ? 'sponsored' : t.feeToken ? `fee ${feeText(t.chainId, t.feeToken, t.feeValue, tokens)}` : '—'}
                </td>
                <td data-label="Gas used" class="minor">
                  {t.gasUsed ? grouped(t.gasUsed) : ''}
                </td>
                <td data-label="Cost" data-testid="tx-cost">
                  {t.cost !== '0' ? <Amount wei={t.cost} unit={units.get(t.chainId) ?? NO_UNIT} /> : ''}
                </td>
                <td data-label="Queued" class="when">
                  {when(t.queuedAt)}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </TableWrap>
    </div>
  );
}

interface Attempt {
  id: number;
  sender: string;
  nonce: number;
  hash: string;
  gasLimit: number;
  maxFee: string | null;
  maxPriorityFee: string | null;
  gasPrice: string | null;
  status: string;
  error: string | null;
  createdAt: string;
  broadcastAt: string | null;
  minedBlock: number | null;
}

interface CallArg {
  name: string;
  type: string;
  value: string;
  display?: string;
}

interface DecodedCall {
  from: string;
  target: string;
  valueWei: string;
  signature: string | null;
  functionName: string | null;
  standard: string | null;
  args: CallArg[];
  selector: string;
  dataBytes: number;
  targetName: string | null;
}

interface Cost {
  gasUsed: number;
  gasPriceWei: string;
  wei: string;
  inTokens: { symbol: string; amount: string; nativePrice: string; source: string }[];
}

interface Detail {
  transaction: MetaTxn & { gasLimit: number };
  receipt: { status: string; txnReceipt: string; revertReason: string | null; blockNumber: string };
  attempts: Attempt[];
  calls: DecodedCall[] | null;
  cost: Cost | null;
}

/** An argument as read: a token amount in its units (the base units on hover), an integer grouped, an address shortened. */
function ArgValue({ a }: { a: CallArg }) {
  if (a.display) return <span title={`${a.value} base units`}>{a.display}</span>;
  if (/^u?int\d*$/.test(a.type)) return <span title={a.value}>{grouped(a.value)}</span>;
  if (a.type === 'address') return <code title={a.value}>{short(a.value, 12)}</code>;
  return <code class="wrap">{a.value.length > 80 ? `${a.value.slice(0, 80)}…` : a.value}</code>;
}

/** The calls a meta-transaction makes: the function and its arguments where a known ABI decodes it, else the selector and size. */
function Calls({ calls, unit }: { calls: DecodedCall[]; unit: Unit }) {
  return (
    <ol class="calls" data-testid="calls">
      {calls.map((c, i) => (
        <li data-testid={`call-${i}`}>
          <div>
            {c.signature ? (
              <strong data-testid={`call-${i}-function`}>{c.functionName}</strong>
            ) : (
              <span class="hint">
                unknown function <code>{c.selector}</code> ({grouped(c.dataBytes)} bytes)
              </span>
            )}{' '}
            on <code title={c.target}>{short(c.target, 12)}</code>
            {c.targetName && ` (${c.targetName})`}
            {c.standard && <span class="badge">{c.standard}</span>}
            {c.valueWei !== '0' && (
              <>
                {' '}
                with <Amount wei={c.valueWei} unit={unit} />
              </>
            )}
          </div>
          {c.args.length > 0 && (
            <dl class="args">
              {c.args.map((a) => [
                <dt>{a.name}</dt>,
                <dd data-testid={`call-${i}-arg-${a.name}`}>
                  <ArgValue a={a} />
                </dd>,
              ])}
            </dl>
          )}
        </li>
      ))}
    </ol>
  );
}

export function ActivityDetail({ projectId, txKey }: { projectId: number; txKey: string }) {
  const [chainID, metaTxID] = txKey.split(':');
  const units = useUnits();
  const tokens = useFeeTokens();
  const d = useApi<Detail>('GetMetaTransaction', { chainID, metaTxID });
  const receipt = d.data?.receipt.txnReceipt && d.data.receipt.txnReceipt !== 'null' ? JSON.parse(d.data.receipt.txnReceipt) : null;
  const t = d.data?.transaction;
  const unit = (t && units.get(t.chainId)) || NO_UNIT;
  return (
    <section>
      <p>
        <a href={`#/projects/${projectId}/activity`}>← Activity</a>
      </p>
      <h2>
        Meta-transaction <code>{short(metaTxID, 16)}</code>
      </h2>
      {d.error && <p class="error">{d.error}</p>}
      {d.data && t && (
        <>
          <dl class="facts">
            <dt>Status</dt>
            <dd data-testid="detail-status">{t.txnStatus}</dd>
            <dt>Network</dt>
            <dd>{t.network}</dd>
            <dt>Wallet</dt>
            <dd>
              <code>{t.walletAddress}</code>
            </dd>
            <dt>Transaction</dt>
            <dd>
              <code>{t.txnHash || '—'}</code>
            </dd>
            <dt>Block</dt>
            <dd>{d.data.receipt.blockNumber}</dd>
            <dt>Queued</dt>
            <dd>{when(t.queuedAt)}</dd>
            <dt>Mined</dt>
            <dd>{when(t.minedAt)}</dd>
            <dt>Gas used</dt>
            <dd data-testid="detail-gas">
              {t.gasUsed ? grouped(t.gasUsed) : '—'}
              {t.gasLimit ? <span class="hint"> of a {grouped(t.gasLimit)} limit</span> : ''}
            </dd>
            <dt>Cost</dt>
            <dd data-testid="detail-cost">
              {d.data.cost ? (
                <>
                  {grouped(d.data.cost.gasUsed)} gas × <GasPrice wei={d.data.cost.gasPriceWei} /> = <Amount wei={d.data.cost.wei} unit={unit} testid="detail-cost-native" />
                  {d.data.cost.inTokens.map((x) => (
                    <span class="hint" data-testid={`detail-cost-${x.symbol}`} title={`at ${x.nativePrice} ${unit.symbol} per ${x.symbol} (${x.source})`}>
                      {' '}
                      ≈ {x.amount} {x.symbol}
                    </span>
                  ))}
                </>
              ) : (
                'not mined yet'
              )}
            </dd>
            <dt>Paid by</dt>
            <dd data-testid="detail-paid">{t.isWhitelisted ? 'sponsorship' : t.feeToken ? `fee ${feeText(t.chainId, t.feeToken, t.feeValue, tokens)}` : '—'}</dd>
            {d.data.receipt.revertReason && (
              <>
                <dt>Revert reason</dt>
                <dd>{d.data.receipt.revertReason}</dd>
              </>
            )}
          </dl>
          <h3>Calls</h3>
          {d.data.calls ? <Calls calls={d.data.calls} unit={unit} /> : <p class="hint">The input does not decode as a wallet bundle.</p>}
          <h3>Broadcast attempts</h3>
          <TableWrap>
            <table data-testid="attempts" class="reflow">
              <thead>
                <tr>
                  <th>#</th>
                  <th>Hash</th>
                  <th>Sender</th>
                  <th>Nonce</th>
                  <th>Gas limit</th>
                  <th>Max fee</th>
                  <th>Tip</th>
                  <th>Status</th>
                  <th>Broadcast</th>
                  <th>Block</th>
                </tr>
              </thead>
              <tbody>
                {d.data.attempts.map((a) => (
                  <tr key={a.id}>
                    <td data-label="#">{a.id}</td>
                    <td data-label="Hash">
                      <code title={a.hash}>{short(a.hash, 14)}</code>
                    </td>
                    <td data-label="Sender">
                      <code title={a.sender}>{short(a.sender)}</code>
                    </td>
                    <td data-label="Nonce">{a.nonce}</td>
                    <td data-label="Gas limit" data-testid="attempt-gas-limit">
                      {grouped(a.gasLimit)}
                    </td>
                    <td data-label={a.maxFee ? 'Max fee' : 'Gas price'}>
                      <GasPrice wei={a.maxFee ?? a.gasPrice} testid="attempt-max-fee" />
                    </td>
                    <td data-label="Tip">{a.maxPriorityFee ? <GasPrice wei={a.maxPriorityFee} testid="attempt-tip" /> : '—'}</td>
                    <td data-label="Status">
                      {a.status}
                      {a.error ? `: ${a.error}` : ''}
                    </td>
                    <td data-label="Broadcast">{when(a.broadcastAt)}</td>
                    <td data-label="Block">{a.minedBlock ?? ''}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableWrap>
          <details>
            <summary>Receipt</summary>
            <pre data-testid="receipt">{receipt ? JSON.stringify(receipt, null, 2) : 'not mined yet'}</pre>
          </details>
        </>
      )}
      <button onClick={d.reload}>Refresh</button>
    </section>
  );
}
