import '../readable.css';
import { when } from '../api.ts';
import { useApi } from '../hooks.ts';
import { Pager, TableWrap, usePaged, type Paged } from '../list.tsx';

interface RequestRow {
  id: number;
  at: string;
  method: string;
  status: number;
  ms: number;
  keyId: number | null;
  clientNet: string | null;
}

interface RequestPage extends Paged {
  requests: RequestRow[];
  keep: number;
}

const PAGE = 50;

/** A project's recent requests (never the key: its id, and the client's network rather than its address). */
export function Requests({ projectId }: { projectId: number }) {
  const list = usePaged<RequestPage>('ProjectRequests', { projectId }, PAGE);
  const rows = list.data?.requests ?? [];
  return (
    <div>
      <p class="hint">
        The newest {list.data?.keep.toLocaleString('en-US') ?? '…'} requests made with this project's access keys, refused ones included (a few seconds behind: they are written in batches).{' '}
        <button type="button" class="secondary" onClick={list.reload} data-testid="refresh-requests">
          Refresh
        </button>
      </p>
      {list.error && <p class="error">{list.error}</p>}
      <Pager paged={list} shown={rows.length} testid="requests" noun="requests" />
      <TableWrap>
        <table data-testid="requests" class="reflow">
          <thead>
            <tr>
              <th>Time</th>
              <th>Method</th>
              <th>Status</th>
              <th>Latency</th>
              <th>Key</th>
              <th>Client network</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((r) => (
              <tr key={r.id} data-testid={`request-${r.id}`}>
                <td data-label="Time">{when(r.at)}</td>
                <td data-label="Method">
                  <code>{r.method}</code>
                </td>
                <td data-label="Status" class={r.status >= 400 ? 'error' : 'ok'} data-testid="request-status">
                  {r.status}
                </td>
                <td data-label="Latency">{r.ms < 10 ? r.ms.toFixed(1) : Math.round(r.ms).toLocaleString('en-US')} ms</td>
                <td data-label="Key">{r.keyId == null ? '—' : `#${r.keyId}`}</td>
                <td data-label="Client network">
                  <code>{r.clientNet ?? '—'}</code>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </TableWrap>
    </div>
  );
}

interface Alert {
  kind: 'sponsorCap' | 'gasTank';
  chainId: number;
  network: string;
  ruleId: number | null;
  limit: string;
  share: number | null;
  runwayDays: number | null;
  message: string;
}

/** The project's alerts, above every tab: a sponsorship rule near a cap, a balance near empty. */
export function Alerts({ projectId }: { projectId: number }) {
  const d = useApi<{ alerts: Alert[] }>('ProjectAlerts', { projectId }, [projectId]);
  if (!d.data?.alerts.length) return null;
  return (
    <ul class="alerts" data-testid="alerts">
      {d.data.alerts.map((a) => (
        <li data-testid={`alert-${a.kind}-${a.ruleId ?? a.chainId}`}>
          <strong>{a.kind === 'sponsorCap' ? 'Sponsorship near its cap' : 'Balance running low'}:</strong> {a.message}.{' '}
          <a href={`#/projects/${projectId}/${a.kind === 'sponsorCap' ? 'sponsors' : 'balance'}`}>{a.kind === 'sponsorCap' ? 'Sponsorship' : 'Balance'} →</a>
        </li>
      ))}
    </ul>
  );
}
