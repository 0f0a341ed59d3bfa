import { short, when } from '../api.ts';
import { useApi } from '../hooks.ts';

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

export function Activity({ projectId }: { projectId: number }) {
  const list = useApi<{ transactions: MetaTxn[] }>('GetMetaTransactions', { projectId, page: { pageSize: 50 } });
  return (
    <div>
      <p>
        <button onClick={list.reload} data-testid="refresh-activity">
          Refresh
        </button>
      </p>
      {list.error && <p class="error">{list.error}</p>}
      <table data-testid="activity">
        <thead>
          <tr>
            <th>Meta-transaction</th>
            <th>Network</th>
            <th>Status</th>
            <th>Wallet</th>
            <th>Transaction</th>
            <th>Paid by</th>
            <th>Gas used</th>
            <th>Cost (wei)</th>
            <th>Queued</th>
          </tr>
        </thead>
        <tbody>
          {list.data?.transactions.map((t) => (
            <tr key={t.metaTxnID} data-testid={`tx-${t.metaTxnID}`}>
              <td>
                <a href={`#/projects/${projectId}/tx/${t.chainId}:${t.metaTxnID}`}>
                  <code>{short(t.metaTxnID)}</code>
                </a>
              </td>
              <td>{t.network}</td>
              <td class={`status ${t.txnStatus}`} data-testid="tx-status">
                {t.txnStatus}
              </td>
              <td>
                <code>{short(t.walletAddress)}</code>
              </td>
              <td>
                <code>{short(t.txnHash)}</code>
              </td>
              <td>{t.isWhitelisted ? 'sponsored' : t.feeToken ? `fee ${t.feeValue} (${short(t.feeToken)})` : '—'}</td>
              <td>{t.gasUsed || ''}</td>
              <td>{t.cost}</td>
              <td>{when(t.queuedAt)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {list.data?.transactions.length === 0 && <p>No meta-transactions yet.</p>}
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
          <h3>Receipt</h3>
          <pre data-testid="receipt">{receipt ? JSON.stringify(receipt, null, 2) : 'not mined yet'}</pre>
        </>
      )}
      <button onClick={d.reload}>Refresh</button>
    </section>
  );
}
