import { useState } from 'preact/hooks';
import { Amount, NO_UNIT, useUnits } from '../amount.tsx';
import { short, when } from '../api.ts';
import { useApi } from '../hooks.ts';
import { Pager, TableWrap, usePaged, type Paged } from '../list.tsx';

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
        <table data-testid="activity" class="reflow">
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
                <td data-label="Transaction">
                  <code title={t.txnHash}>{short(t.txnHash)}</code>
                </td>
                <td data-label="Paid by">{t.isWhitelisted ? 'sponsored' : t.feeToken ? `fee ${t.feeValue} (${short(t.feeToken)})` : '—'}</td>
                <td data-label="Gas used">{t.gasUsed ? t.gasUsed.toLocaleString('en-US') : ''}</td>
                <td data-label="Cost" data-testid="tx-cost">
                  {t.cost !== '0' ? <Amount wei={t.cost} unit={units.get(t.chainId) ?? NO_UNIT} /> : ''}
                </td>
                <td data-label="Queued">{when(t.queuedAt)}</td>
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

export function ActivityDetail({ projectId, txKey }: { projectId: number; txKey: string }) {
  const [chainID, metaTxID] = txKey.split(':');
  const d = useApi<{ transaction: MetaTxn; receipt: { status: string; txnReceipt: string; revertReason: string | null; blockNumber: string }; attempts: Attempt[] }>('GetMetaTransaction', {
    chainID,
    metaTxID,
  });
  const receipt = d.data?.receipt.txnReceipt && d.data.receipt.txnReceipt !== 'null' ? JSON.parse(d.data.receipt.txnReceipt) : null;
  return (
    <section>
      <p>
        <a href={`#/projects/${projectId}/activity`}>← Activity</a>
      </p>
      <h2>
        Meta-transaction <code>{short(metaTxID, 16)}</code>
      </h2>
      {d.error && <p class="error">{d.error}</p>}
      {d.data && (
        <>
          <dl class="facts">
            <dt>Status</dt>
            <dd data-testid="detail-status">{d.data.transaction.txnStatus}</dd>
            <dt>Network</dt>
            <dd>{d.data.transaction.network}</dd>
            <dt>Wallet</dt>
            <dd>
              <code>{d.data.transaction.walletAddress}</code>
            </dd>
            <dt>Transaction</dt>
            <dd>
              <code>{d.data.transaction.txnHash || '—'}</code>
            </dd>
            <dt>Block</dt>
            <dd>{d.data.receipt.blockNumber}</dd>
            <dt>Gas used</dt>
            <dd>{d.data.transaction.gasUsed}</dd>
            <dt>Paid by</dt>
            <dd>{d.data.transaction.isWhitelisted ? 'sponsorship' : `fee ${d.data.transaction.feeValue ?? '—'}`}</dd>
            {d.data.receipt.revertReason && (
              <>
                <dt>Revert reason</dt>
                <dd>{d.data.receipt.revertReason}</dd>
              </>
            )}
          </dl>
          <h3>Broadcast attempts</h3>
          <TableWrap>
            <table data-testid="attempts">
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
                    <td>{a.id}</td>
                    <td>
                      <code>{short(a.hash, 14)}</code>
                    </td>
                    <td>
                      <code>{short(a.sender)}</code>
                    </td>
                    <td>{a.nonce}</td>
                    <td>{a.gasLimit}</td>
                    <td>{a.maxFee ?? a.gasPrice}</td>
                    <td>{a.maxPriorityFee}</td>
                    <td>
                      {a.status}
                      {a.error ? `: ${a.error}` : ''}
                    </td>
                    <td>{when(a.broadcastAt)}</td>
                    <td>{a.minedBlock ?? ''}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </TableWrap>
          <h3>Receipt</h3>
          <pre data-testid="receipt">{receipt ? JSON.stringify(receipt, null, 2) : 'not mined yet'}</pre>
        </>
      )}
      <button onClick={d.reload}>Refresh</button>
    </section>
  );
}
