import { useState } from 'preact/hooks';
import { api, short, when } from '../api.ts';
import { ConfirmButton } from '../confirm.tsx';
import { useAction, useApi } from '../hooks.ts';
import { TableWrap } from '../list.tsx';
import '../editor.css';

/*
 * A project's indexer webhook listeners (docs/webhooks.md): what each one is told of (its filter), where,
 * whether it is on, and its latest deliveries; removing one asks first. A project adds and edits them
 * with its key through the Indexer's …WebhookListener methods.
 */

interface Listener {
  id: number;
  chainId: number;
  network: string;
  url: string;
  name: string;
  active: boolean;
  disabledReason: string | null;
  filter: { events: string[]; topics: string[]; contractAddresses: string[]; accounts: string[]; tokenIDs: string[] };
  fromBlock: number;
  /** Logs it was not told: its project reached webhooks.maxListenerDeliveriesPerBlock in their block. */
  droppedLogs: number;
  lastDroppedBlock: number | null;
  updatedAt: string;
}

interface Delivery {
  id: number;
  eventId: string;
  status: string;
  attempts: number;
  statusCode: number | null;
  error: string | null;
  latencyMs: number | null;
  createdAt: string;
}

const listText = (l: string[], none: string) => (l.length ? l.map((x) => short(x, 12)).join(', ') : none);

export function Listeners({ projectId }: { projectId: number }) {
  const list = useApi<{ listeners: Listener[]; indexedChains: { chainId: number; network: string }[] }>('ListProjectListeners', { projectId });
  const [open, setOpen] = useState<Listener | null>(null);
  const a = useAction();
  const rows = list.data?.listeners ?? [];
  return (
    <div class="stack">
      <p class="hint">
        Indexer webhook listeners: a URL told of the indexed chain's events that match a filter (contracts, accounts, token ids), signed with the listener's secret. The project adds and edits them
        with its key through the Indexer's <code>AddWebhookListener</code> / <code>UpdateWebhookListener</code>.
      </p>
      {list.data && list.data.indexedChains.length === 0 && <p class="note">No chain is indexed here (chains[].indexer), so there can be no listeners.</p>}
      {list.error && <p class="error">{list.error}</p>}
      {a.error && <p class="error">{a.error}</p>}
      {list.data && rows.length === 0 && (
        <p class="hint" data-testid="listeners-none">
          No listeners.
        </p>
      )}
      {rows.length > 0 && (
        <TableWrap>
          <table data-testid="listeners" class="reflow">
            <thead>
              <tr>
                <th>Id</th>
                <th>Network</th>
                <th>URL</th>
                <th>Events</th>
                <th>Contracts</th>
                <th>State</th>
                <th />
              </tr>
            </thead>
            <tbody>
              {rows.map((l) => (
                <tr key={l.id} data-testid={`listener-${l.id}`}>
                  <td data-label="Id">{l.id}</td>
                  <td data-label="Network">{l.network}</td>
                  <td data-label="URL" class="wrap-cell">
                    <button type="button" class="link" data-testid={`listener-open-${l.id}`} onClick={() => setOpen(l)}>
                      {l.url}
                    </button>
                    {l.name && <div class="hint">{l.name}</div>}
                  </td>
                  <td data-label="Events">{listText(l.filter.events, 'all')}</td>
                  <td data-label="Contracts">{listText(l.filter.contractAddresses, 'any')}</td>
                  <td data-label="State">
                    {l.active ? (
                      <span class="badge published">on</span>
                    ) : (
                      <span class="badge" title={l.disabledReason ?? 'paused'}>
                        {l.disabledReason ? 'disabled' : 'paused'}
                      </span>
                    )}
                  </td>
                  <td>
                    <ConfirmButton
                      label="Remove"
                      testid={`listener-remove-${l.id}`}
                      question={`Remove listener ${l.id} (${l.url})? It is told of nothing more; its pending deliveries are dropped.`}
                      onConfirm={async () => {
                        if (await a.run(() => api('RemoveProjectListener', { projectId, chainID: String(l.chainId), id: l.id }))) {
                          if (open?.id === l.id) setOpen(null);
                          void list.reload();
                        }
                      }}
                    />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      )}
      {open && <ListenerDetail projectId={projectId} listener={open} onClose={() => setOpen(null)} />}
    </div>
  );
}

function ListenerDetail({ projectId, listener, onClose }: { projectId: number; listener: Listener; onClose: () => void }) {
  const d = useApi<{ listener: Listener; deliveries: Delivery[] }>('GetProjectListener', { projectId, chainID: String(listener.chainId), id: listener.id });
  const l = d.data?.listener ?? listener;
  const f = l.filter;
  return (
    <section class="card stack" data-testid="listener-detail">
      <div class="row">
        <h3 style={{ margin: 0, flex: 1 }}>Listener {l.id}</h3>
        <button type="button" class="secondary" onClick={onClose}>
          Close
        </button>
      </div>
      {l.disabledReason && <p class="note">Disabled by the delivery worker: {l.disabledReason}</p>}
      {l.droppedLogs > 0 && (
        <p class="note" data-testid="listener-dropped">
          {l.droppedLogs.toLocaleString('en-US')} logs were not sent: the project reached its deliveries per block (webhooks.maxListenerDeliveriesPerBlock), last in block{' '}
          {l.lastDroppedBlock?.toLocaleString('en-US')}.
        </p>
      )}
      <dl class="facts">
        <dt>URL</dt>
        <dd>
          <code>{l.url}</code>
        </dd>
        <dt>Network</dt>
        <dd>{l.network}</dd>
        <dt>Events</dt>
        <dd>{f.events.join(', ') || 'all'}</dd>
        <dt>Contracts</dt>
        <dd data-testid="listener-contracts">{f.contractAddresses.join(', ') || 'any'}</dd>
        <dt>Accounts</dt>
        <dd>{f.accounts.join(', ') || 'any'}</dd>
        <dt>Token ids</dt>
        <dd>{f.tokenIDs.join(', ') || 'any'}</dd>
        <dt>From block</dt>
        <dd>{l.fromBlock.toLocaleString('en-US')}</dd>
        <dt>Changed</dt>
        <dd>{when(l.updatedAt)}</dd>
      </dl>
      <strong>Latest deliveries</strong>
      {d.error && <p class="error">{d.error}</p>}
      {d.data && d.data.deliveries.length === 0 && <p class="hint">None yet.</p>}
      {d.data && d.data.deliveries.length > 0 && (
        <TableWrap>
          <table data-testid="listener-deliveries" class="reflow">
            <thead>
              <tr>
                <th>Event</th>
                <th>Status</th>
                <th>Attempts</th>
                <th>Answer</th>
                <th>Queued</th>
              </tr>
            </thead>
            <tbody>
              {d.data.deliveries.map((x) => (
                <tr key={x.id}>
                  <td data-label="Event">{x.eventId}</td>
                  <td data-label="Status">{x.status}</td>
                  <td data-label="Attempts">{x.attempts}</td>
                  <td data-label="Answer">{x.statusCode ?? x.error ?? '—'}</td>
                  <td data-label="Queued">{when(x.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      )}
    </section>
  );
}
