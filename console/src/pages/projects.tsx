import { useState } from 'preact/hooks';
import { api, when } from '../api.ts';
import { NO_UNIT, readableNative, readableUsd, useUnits } from '../amount.tsx';
import { ConfirmButton } from '../confirm.tsx';
import { useAction, useApi } from '../hooks.ts';
import { Pager, TableWrap, usePaged, type Paged } from '../list.tsx';
import { Activity } from './activity.tsx';
import { Alerts, Requests } from './requests.tsx';
import { Balances } from './balances.tsx';
import { Collections } from './collections.tsx';
import { Overview } from './overview.tsx';
import { Sponsors } from './sponsors.tsx';
import { Webhooks } from './webhooks.tsx';
import { Listeners } from './listeners.tsx';

export interface Project {
  id: number;
  name: string;
  createdAt: string;
  archivedAt: string | null;
  allowedChainIds: number[] | null;
  liveKeys: number;
  /** The last 30 days, from the server's roll-ups. */
  totals: { requests: number; metaTxns: number; succeeded: number; successRate: number | null; spendUsd: number | null; spend: { chainId: number; network: string; costWei: string }[] };
}

export function Projects() {
  const list = useApi<{ projects: Project[] }>('ListProjects', {});
  const units = useUnits();
  const [name, setName] = useState('');
  const a = useAction();
  const create = async (e: Event) => {
    e.preventDefault();
    const r = await a.run(() => api<{ project: Project }>('CreateProject', { name }));
    if (r) {
      setName('');
      location.hash = `#/projects/${r.project.id}`;
    }
  };
  return (
    <section>
      <h2>Projects</h2>
      <form class="row" onSubmit={create}>
        <input data-testid="project-name" placeholder="New project name" value={name} onInput={(e) => setName(e.currentTarget.value)} />
        <button data-testid="create-project" disabled={!name.trim() || a.busy}>
          Create project
        </button>
      </form>
      {a.error && <p class="error">{a.error}</p>}
      {list.error && <p class="error">{list.error}</p>}
      <TableWrap>
        <table data-testid="projects">
          <thead>
            <tr>
              <th>Id</th>
              <th>Name</th>
              <th>Live keys</th>
              <th title="last 30 days">Requests</th>
              <th title="last 30 days">Meta-txns</th>
              <th title="of those finished, last 30 days">Success</th>
              <th title="last 30 days">Spend</th>
              <th>Networks</th>
              <th>Created</th>
              <th>State</th>
            </tr>
          </thead>
          <tbody>
            {list.data?.projects.map((p) => (
              <tr key={p.id}>
                <td>{p.id}</td>
                <td>
                  <a href={`#/projects/${p.id}`}>{p.name}</a>
                </td>
                <td>{p.liveKeys}</td>
                <td data-testid={`totals-requests-${p.id}`}>{p.totals.requests.toLocaleString('en-US')}</td>
                <td data-testid={`totals-metatxns-${p.id}`}>{p.totals.metaTxns.toLocaleString('en-US')}</td>
                <td>{p.totals.successRate == null ? '—' : `${Math.round(p.totals.successRate * 1000) / 10}%`}</td>
                <td data-testid={`totals-spend-${p.id}`} title={p.totals.spend.map((x) => `${x.network}: ${x.costWei} wei`).join('\n')}>
                  {p.totals.spend.length === 0 ? '—' : p.totals.spend.map((x) => `${readableNative(x.costWei)} ${(units.get(x.chainId) ?? NO_UNIT).symbol} on ${x.network}`).join(', ')}
                  {p.totals.spendUsd != null && <span class="usd"> · {readableUsd(p.totals.spendUsd)}</span>}
                </td>
                <td>{p.allowedChainIds?.join(', ') ?? 'all'}</td>
                <td>{when(p.createdAt)}</td>
                <td>{p.archivedAt ? 'archived' : 'active'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </TableWrap>
    </section>
  );
}

const TABS: [string, string][] = [
  ['overview', 'Overview'],
  ['keys', 'Access keys'],
  ['sponsors', 'Sponsorship'],
  ['balance', 'Balance'],
  ['webhooks', 'Webhooks'],
  ['listeners', 'Listeners'],
  ['activity', 'Activity'],
  ['requests', 'Requests'],
  ['collections', 'Collections'],
  ['settings', 'Settings'],
];

/** `item`: the route's fourth part, a collection's id on the Collections tab. */
export function ProjectDetail({ projectId, tab, item }: { projectId: number; tab: string; item?: string }) {
  // Read again for each project opened: one made since (another tab, the CLI) is not in an older list.
  const list = useApi<{ projects: Project[] }>('ListProjects', {}, [projectId]);
  const project = list.data?.projects.find((p) => p.id === projectId);
  if (list.error) return <p class="error">{list.error}</p>;
  if (!list.data) return <p>Loading…</p>;
  if (!project) return <p class="error">No project {projectId}.</p>;
  return (
    <section>
      <p>
        <a href="#/projects">← Projects</a>
      </p>
      <h2 data-testid="project-title">
        {project.name} {project.archivedAt && <span class="badge">archived</span>}
      </h2>
      <nav class="tabs">
        {TABS.map(([k, label]) => (
          <a href={`#/projects/${projectId}/${k}`} class={tab === k ? 'active' : ''} data-testid={`tab-${k}`}>
            {label}
          </a>
        ))}
      </nav>
      <Alerts projectId={projectId} />
      {tab === 'overview' && <Overview projectId={projectId} />}
      {tab === 'keys' && <Keys projectId={projectId} />}
      {tab === 'sponsors' && <Sponsors projectId={projectId} />}
      {tab === 'balance' && <Balances projectId={projectId} />}
      {tab === 'webhooks' && <Webhooks projectId={projectId} />}
      {tab === 'listeners' && <Listeners projectId={projectId} />}
      {tab === 'activity' && <Activity projectId={projectId} />}
      {tab === 'requests' && <Requests projectId={projectId} />}
      {tab === 'collections' && <Collections projectId={projectId} collectionId={item ? Number(item) : undefined} />}
      {tab === 'settings' && <Settings project={project} onChange={list.reload} />}
    </section>
  );
}

interface KeyPage extends Paged {
  accessKeys: Key[];
  counts: { live: number; revoked: number };
}

interface Key {
  id: number;
  prefix: string;
  label: string;
  kind: 'publishable' | 'secret';
  allowedOrigins: string[] | null;
  createdAt: string;
  revokedAt: string | null;
  lastUsedAt: string | null;
  requestCount: number;
  rateLimit: { ratePerSec: number; burst: number } | null;
  rateLimitIsDefault: boolean;
}

function Keys({ projectId }: { projectId: number }) {
  const [state, setState] = useState('');
  const [search, setSearch] = useState('');
  const keys = usePaged<KeyPage>('ListAccessKeys', { projectId, ...(state ? { state } : {}), ...(search.trim() ? { search: search.trim() } : {}) }, 25);
  const counts = keys.data?.counts;
  const [label, setLabel] = useState('');
  const [rate, setRate] = useState('');
  const [burst, setBurst] = useState('');
  const [kind, setKind] = useState<'publishable' | 'secret'>('publishable');
  const [origins, setOrigins] = useState('');
  const [shown, setShown] = useState<string | null>(null);
  const a = useAction();
  const create = async (e: Event) => {
    e.preventDefault();
    const args: Record<string, unknown> = { projectId, label, kind };
    if (rate) args.ratePerSec = Number(rate);
    if (burst) args.rateBurst = Number(burst);
    const list = origins.split(/[\s,]+/).filter(Boolean);
    if (kind === 'publishable' && list.length) args.allowedOrigins = list;
    const r = await a.run(() => api<{ accessKey: string }>('CreateAccessKey', args));
    if (r) {
      setShown(r.accessKey);
      setLabel('');
      await keys.reload();
    }
  };
  const revoke = async (k: Key) => {
    if (await a.run(() => api('RevokeAccessKey', { projectId, keyId: k.id }))) await keys.reload();
  };
  const rotate = async (k: Key) => {
    const r = await a.run(() => api<{ accessKey: string }>('RotateAccessKey', { projectId, keyId: k.id }));
    if (r) {
      setShown(r.accessKey);
      await keys.reload();
    }
  };
  return (
    <div>
      <form class="row" onSubmit={create}>
        <select data-testid="key-kind" value={kind} onChange={(e) => setKind(e.currentTarget.value as 'publishable' | 'secret')} aria-label="Kind">
          <option value="publishable">Publishable (apps: reads, relays)</option>
          <option value="secret">Secret (backends: also writes)</option>
        </select>
        <input data-testid="key-label" placeholder="Label" value={label} onInput={(e) => setLabel(e.currentTarget.value)} />
        {kind === 'publishable' && <input data-testid="key-origins" placeholder="Allowed origins (any)" value={origins} onInput={(e) => setOrigins(e.currentTarget.value)} />}
        <input class="num" placeholder="Requests/s (default)" value={rate} onInput={(e) => setRate(e.currentTarget.value)} />
        <input class="num" placeholder="Burst" value={burst} onInput={(e) => setBurst(e.currentTarget.value)} />
        <button data-testid="create-key" disabled={a.busy}>
          Create access key
        </button>
      </form>
      {shown && (
        <div class="reveal">
          <p>Copy this key now: it is stored only as a hash and will not be shown again.</p>
          <code data-testid="new-key">{shown}</code>{' '}
          <button class="link" onClick={() => setShown(null)}>
            Done
          </button>
        </div>
      )}
      {a.error && <p class="error">{a.error}</p>}
      <div class="row filters">
        <select data-testid="keys-state" value={state} onChange={(e) => setState(e.currentTarget.value)} aria-label="State">
          <option value="">Live and revoked{counts ? ` (${counts.live + counts.revoked})` : ''}</option>
          <option value="live">Live{counts ? ` (${counts.live})` : ''}</option>
          <option value="revoked">Revoked{counts ? ` (${counts.revoked})` : ''}</option>
        </select>
        <input data-testid="keys-search" placeholder="Search label or prefix" value={search} onInput={(e) => setSearch(e.currentTarget.value)} />
        <Pager paged={keys} shown={keys.data?.accessKeys.length ?? 0} testid="keys" noun="keys" />
      </div>
      <TableWrap>
        <table data-testid="keys" class="reflow">
          <thead>
            <tr>
              <th>Key</th>
              <th>Kind</th>
              <th>Label</th>
              <th>Created</th>
              <th>Last used</th>
              <th>Requests</th>
              <th>Rate limit</th>
              <th>State</th>
              <th></th>
            </tr>
          </thead>
          <tbody>
            {keys.data?.accessKeys.map((k) => (
              <tr key={k.id} data-testid={`key-${k.id}`}>
                <td data-label="Key">
                  <code>{k.prefix}…</code>
                </td>
                <td data-label="Kind" data-testid={`key-kind-${k.id}`}>
                  {k.kind}
                  {k.allowedOrigins ? ` (${k.allowedOrigins.join(', ')})` : ''}
                </td>
                <td data-label="Label">{k.label}</td>
                <td data-label="Created">{when(k.createdAt)}</td>
                <td data-label="Last used">{when(k.lastUsedAt)}</td>
                <td data-label="Requests">{k.requestCount}</td>
                <td data-label="Rate limit">{k.rateLimit ? `${k.rateLimit.ratePerSec}/s, burst ${k.rateLimit.burst}${k.rateLimitIsDefault ? ' (default)' : ''}` : 'none'}</td>
                <td data-label="State">{k.revokedAt ? `revoked ${when(k.revokedAt)}` : 'live'}</td>
                <td>
                  {!k.revokedAt && (
                    <ConfirmButton
                      testid={`rotate-${k.id}`}
                      label="Rotate"
                      question={`Replace ${k.label || k.prefix} with a new ${k.kind} key? The old key stops at once.`}
                      confirmLabel="Rotate key"
                      onConfirm={() => rotate(k)}
                    />
                  )}{' '}
                  {!k.revokedAt && (
                    <ConfirmButton
                      testid={`revoke-${k.id}`}
                      label="Revoke"
                      question={`Revoke ${k.label || k.prefix}? Requests with it stop at once; this cannot be undone.`}
                      confirmLabel="Revoke key"
                      onConfirm={() => revoke(k)}
                    />
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </TableWrap>
    </div>
  );
}

function Settings({ project, onChange }: { project: Project; onChange: () => Promise<void> }) {
  const [name, setName] = useState(project.name);
  const [nets, setNets] = useState(project.allowedChainIds?.join(', ') ?? '');
  const a = useAction();
  const update = async (patch: Record<string, unknown>) => {
    if (await a.run(() => api('UpdateProject', { projectId: project.id, ...patch }))) await onChange();
  };
  return (
    <div class="stack">
      <form class="row" onSubmit={(e) => (e.preventDefault(), update({ name }))}>
        <input data-testid="rename" value={name} onInput={(e) => setName(e.currentTarget.value)} />
        <button>Rename</button>
      </form>
      <form
        class="row"
        onSubmit={(e) => (
          e.preventDefault(),
          update({
            allowedChainIDs: nets
              .split(',')
              .map((x) => x.trim())
              .filter(Boolean),
          })
        )}
      >
        <input placeholder="Allowed networks (empty: all), e.g. mainnet, 137" value={nets} onInput={(e) => setNets(e.currentTarget.value)} />
        <button>Save networks</button>
      </form>
      <div>
        {project.archivedAt ? (
          <button onClick={() => update({ archived: false })}>Restore project</button>
        ) : (
          <ConfirmButton testid="archive" label="Archive project" question={`Archive ${project.name}? Its keys stop working until it is restored.`} onConfirm={() => update({ archived: true })} />
        )}
      </div>
      {a.error && <p class="error">{a.error}</p>}
    </div>
  );
}
