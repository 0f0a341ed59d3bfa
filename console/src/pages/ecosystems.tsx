import { Amount, NO_UNIT, useUnits } from '../amount.tsx';
import { short, when } from '../api.ts';
import { useApi } from '../hooks.ts';
import { TableWrap } from '../list.tsx';

/*
 * Ecosystems (docs/sponsorship.md#ecosystems): named groups of projects whose ecosystem sponsorship
 * rules cover every project in them. Read here; made, joined and left with `metarelay ecosystems`, their
 * rules written with the relayer's …EcosystemGasSponsor methods (admin token).
 */

interface ProjectRef {
  id: number;
  name: string;
  archived: boolean;
}

interface EcosystemRow {
  id: number;
  name: string;
  createdAt: string;
  projects: ProjectRef[];
  rules: number;
  activeRules: number;
}

interface Rule {
  id: number;
  chainId: number;
  network: string;
  kind: string;
  address: string;
  name: string;
  active: boolean;
  dailyCapWei: string | null;
  dailyCapUsd: string | null;
  totalBudgetWei: string | null;
  totalBudgetUsd: string | null;
  spentTodayWei: string;
  spentTotalWei: string;
  webhookUrl: string;
}

const Projects = ({ list }: { list: ProjectRef[] }) =>
  list.length ? (
    <span class="stack-inline">
      {list.map((p) => (
        <a href={`#/projects/${p.id}/sponsors`} key={p.id}>
          {p.name}
          {p.archived ? ' (archived)' : ''}
        </a>
      ))}
    </span>
  ) : (
    <span class="hint">no project yet</span>
  );

export function Ecosystems({ id }: { id?: number }) {
  return id ? <EcosystemDetail id={id} /> : <EcosystemList />;
}

function EcosystemList() {
  const list = useApi<{ ecosystems: EcosystemRow[] }>('ListEcosystems', {});
  const rows = list.data?.ecosystems ?? [];
  return (
    <section>
      <h2>Ecosystems</h2>
      <p class="hint">
        Named groups of projects: an ecosystem's sponsorship rules cover the meta-transactions of every project in it, with one policy and one spend for all. Made and joined with{' '}
        <code>metarelay ecosystems add|join|leave</code>; rules with the relayer's <code>AddEcosystemGasSponsor</code> (admin token).
      </p>
      {list.error && <p class="error">{list.error}</p>}
      {list.data && rows.length === 0 && (
        <p class="hint" data-testid="ecosystems-none">
          No ecosystems yet: <code>npx metarelay ecosystems add NAME</code>.
        </p>
      )}
      {rows.length > 0 && (
        <TableWrap>
          <table data-testid="ecosystems" class="reflow">
            <thead>
              <tr>
                <th>Id</th>
                <th>Name</th>
                <th>Projects</th>
                <th>Sponsorship rules</th>
                <th>Created</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((e) => (
                <tr key={e.id} data-testid={`ecosystem-${e.id}`}>
                  <td data-label="Id">{e.id}</td>
                  <td data-label="Name">
                    <a href={`#/ecosystems/${e.id}`} data-testid={`ecosystem-open-${e.id}`}>
                      {e.name}
                    </a>
                  </td>
                  <td data-label="Projects">
                    <Projects list={e.projects} />
                  </td>
                  <td data-label="Rules" data-testid="ecosystem-rules">
                    {e.activeRules} active of {e.rules}
                  </td>
                  <td data-label="Created">{when(e.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      )}
    </section>
  );
}

function EcosystemDetail({ id }: { id: number }) {
  const d = useApi<{ ecosystem: { id: number; name: string; createdAt: string }; projects: ProjectRef[]; rules: Rule[] }>('GetEcosystem', { ecosystemId: id });
  const units = useUnits();
  if (d.error) return <p class="error">{d.error}</p>;
  if (!d.data) return <p>Loading…</p>;
  const { ecosystem, projects, rules } = d.data;
  const cap = (wei: string | null, usd: string | null, unit: Parameters<typeof Amount>[0]['unit']) =>
    wei || usd ? (
      <span class="stack-inline">
        {wei && <Amount wei={wei} unit={unit} />}
        {usd && <span>${usd}</span>}
      </span>
    ) : (
      <span class="hint">none</span>
    );
  return (
    <section class="stack">
      <p>
        <a href="#/ecosystems">← Ecosystems</a>
      </p>
      <h2 data-testid="ecosystem-name">{ecosystem.name}</h2>
      <dl class="facts">
        <dt>Projects</dt>
        <dd data-testid="ecosystem-projects">
          <Projects list={projects} />
        </dd>
        <dt>Created</dt>
        <dd>{when(ecosystem.createdAt)}</dd>
      </dl>
      <h3>Sponsorship rules</h3>
      {rules.length === 0 ? (
        <p class="hint">No rules: the ecosystem sponsors nothing yet.</p>
      ) : (
        <TableWrap>
          <table data-testid="ecosystem-rule-table" class="reflow">
            <thead>
              <tr>
                <th>Network</th>
                <th>Kind</th>
                <th>Address</th>
                <th>Name</th>
                <th>State</th>
                <th>Daily cap</th>
                <th>Total budget</th>
                <th>Spent today</th>
                <th>Spent in all</th>
              </tr>
            </thead>
            <tbody>
              {rules.map((r) => {
                const unit = units.get(r.chainId) ?? NO_UNIT;
                return (
                  <tr key={r.id} data-testid={`ecosystem-rule-${r.id}`}>
                    <td data-label="Network">{r.network}</td>
                    <td data-label="Kind">{r.kind}</td>
                    <td data-label="Address" title={r.address}>
                      <code>{short(r.address)}</code>
                    </td>
                    <td data-label="Name">{r.name || '—'}</td>
                    <td data-label="State">{r.active ? <span class="badge published">on</span> : <span class="badge">off</span>}</td>
                    <td data-label="Daily cap">{cap(r.dailyCapWei, r.dailyCapUsd, unit)}</td>
                    <td data-label="Total budget">{cap(r.totalBudgetWei, r.totalBudgetUsd, unit)}</td>
                    <td data-label="Spent today">
                      <Amount wei={r.spentTodayWei} unit={unit} />
                    </td>
                    <td data-label="Spent in all">
                      <Amount wei={r.spentTotalWei} unit={unit} />
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </TableWrap>
      )}
    </section>
  );
}
