import { useState } from 'preact/hooks';
import { api, short, when } from '../api.ts';
import { ConfirmButton } from '../confirm.tsx';
import { useAction, useApi } from '../hooks.ts';

interface Webhook {
  id: number;
  url: string;
  events: string[];
  chainIds: number[] | null;
  description: string;
  enabled: boolean;
  disabledReason: string | null;
  failingSince: string | null;
}

interface Delivery {
  id: number;
  eventId: string;
  eventType: string;
  status: string;
  attempts: number;
  nextAttemptAt: string | null;
  statusCode: number | null;
  error: string | null;
  latencyMs: number | null;
  responseSnippet: string | null;
  createdAt: string;
}

const TYPES = ['metatxn.status', 'token.metadata_updated', 'sender.low_balance', 'sender.recovered', 'refresh.task_finished', 'contract.info_updated', 'balance.updated'];

/** A project's webhook endpoints: add one (its secret is shown once), test, enable/disable, and each one's recent deliveries. */
export function Webhooks({ projectId }: { projectId: number }) {
  const list = useApi<{ webhooks: Webhook[] }>('ListWebhooks', { projectId });
  const [form, setForm] = useState({ url: '', description: '', events: ['metatxn.status'] as string[] });
  const [secret, setSecret] = useState<string | null>(null);
  const [open, setOpen] = useState<number | null>(null);
  const a = useAction();
  const add = async (e: Event) => {
    e.preventDefault();
    const r = await a.run(() => api<{ secret: string }>('CreateWebhook', { projectId, url: form.url.trim(), events: form.events, description: form.description }));
    if (r) {
      setSecret(r.secret);
      setForm({ ...form, url: '', description: '' });
      await list.reload();
    }
  };
  const toggle = (t: string) => setForm({ ...form, events: form.events.includes(t) ? form.events.filter((x) => x !== t) : [...form.events, t] });
  const update = async (w: Webhook, patch: Record<string, unknown>) => {
    if (await a.run(() => api('UpdateWebhook', { id: w.id, ...patch }))) await list.reload();
  };
  const remove = async (w: Webhook) => {
    if (await a.run(() => api('DeleteWebhook', { id: w.id }))) await list.reload();
  };
  const test = async (w: Webhook) => {
    if (await a.run(() => api('TestWebhook', { id: w.id }))) setOpen(w.id);
  };
  return (
    <div class="stack">
      <form class="row" onSubmit={add}>
        <input data-testid="webhook-url" class="addr" placeholder="https://…" value={form.url} onInput={(e) => setForm({ ...form, url: e.currentTarget.value })} />
        <input placeholder="Description" value={form.description} onInput={(e) => setForm({ ...form, description: e.currentTarget.value })} />
        {TYPES.map((t) => (
          <label class="inline">
            <input type="checkbox" checked={form.events.includes(t)} onChange={() => toggle(t)} /> {t}
          </label>
        ))}
        <button data-testid="add-webhook" disabled={a.busy || !form.url || form.events.length === 0}>
          Add endpoint
        </button>
      </form>
      {secret && (
        <p class="note" data-testid="webhook-secret">
          Signing secret (shown once, store it now): <code>{secret}</code>{' '}
          <button class="link" onClick={() => setSecret(null)}>
            Done
          </button>
        </p>
      )}
      {a.error && <p class="error">{a.error}</p>}
      <table data-testid="webhooks">
        <thead>
          <tr>
            <th>Id</th>
            <th>URL</th>
            <th>Events</th>
            <th>Chains</th>
            <th>On</th>
            <th>Notice</th>
            <th></th>
          </tr>
        </thead>
        <tbody>
          {list.data?.webhooks.map((w) => (
            <tr key={w.id}>
              <td>{w.id}</td>
              <td>
                <code title={w.url}>{short(w.url, 40)}</code>
                {w.description && <div class="hint">{w.description}</div>}
              </td>
              <td>{w.events.join(', ')}</td>
              <td>{w.chainIds?.join(', ') ?? 'all'}</td>
              <td>
                <input type="checkbox" data-testid={`webhook-enabled-${w.id}`} checked={w.enabled} onChange={() => update(w, { enabled: !w.enabled })} />
              </td>
              <td class={w.disabledReason ? 'error' : ''}>{w.disabledReason ?? (w.failingSince ? `failing since ${when(w.failingSince)}` : '')}</td>
              <td>
                <button onClick={() => test(w)} disabled={!w.enabled}>
                  Send test
                </button>{' '}
                <button onClick={() => setOpen(open === w.id ? null : w.id)}>Deliveries</button>{' '}
                <ConfirmButton testid={`webhook-delete-${w.id}`} label="Delete" question="Delete this webhook? It stops receiving events." confirmLabel="Delete webhook" onConfirm={() => remove(w)} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {open != null && <Deliveries webhookId={open} />}
    </div>
  );
}

function Deliveries({ webhookId }: { webhookId: number }) {
  const list = useApi<{ deliveries: Delivery[] }>('ListWebhookDeliveries', { webhookId, limit: 50 });
  const a = useAction();
  const redeliver = async (d: Delivery) => {
    if (await a.run(() => api('RedeliverWebhook', { deliveryId: d.id }))) await list.reload();
  };
  return (
    <div class="panel">
      <h3>
        Recent deliveries of endpoint {webhookId}{' '}
        <button class="link" onClick={() => list.reload()}>
          Reload
        </button>
      </h3>
      {a.error && <p class="error">{a.error}</p>}
      <table data-testid="deliveries">
        <thead>
          <tr>
            <th>Event</th>
            <th>Type</th>
            <th>Status</th>
            <th>Code</th>
            <th>Latency</th>
            <th>Attempts</th>
            <th>Next retry</th>
            <th>Answer / error</th>
            <th></th>
          </tr>
        </thead>
        <tbody>
          {list.data?.deliveries.map((d) => (
            <tr key={d.id}>
              <td>
                <code>{d.eventId}</code>
              </td>
              <td>{d.eventType}</td>
              <td class={d.status === 'DEAD' ? 'error' : d.status === 'DELIVERED' ? 'ok' : ''}>{d.status}</td>
              <td>{d.statusCode ?? '—'}</td>
              <td>{d.latencyMs != null ? `${d.latencyMs} ms` : '—'}</td>
              <td>{d.attempts}</td>
              <td>{d.nextAttemptAt ? when(d.nextAttemptAt) : '—'}</td>
              <td>
                <code>{short(d.error ?? d.responseSnippet ?? '', 60)}</code>
              </td>
              <td>
                <button onClick={() => redeliver(d)}>Redeliver</button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
