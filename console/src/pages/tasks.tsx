import { useState } from 'preact/hooks';
import { short, when } from '../api.ts';
import { useApi } from '../hooks.ts';
import { Pager, TableWrap, usePaged, type Paged } from '../list.tsx';
import type { Project } from './projects.tsx';

interface Task {
  id: number;
  projectId: number | null;
  kind: string;
  network: string;
  contractAddress: string | null;
  status: string;
  source: string;
  total: number;
  succeeded: number;
  failed: number;
  lastError: string | null;
  createdAt: string;
  finishedAt: string | null;
  failures: { item: string; reason: string }[];
}

interface TaskPage extends Paged {
  tasks: Task[];
  counts: Record<string, number>;
}

const TASK_STATUSES = ['QUEUED', 'PAUSED', 'FAILED', 'DONE'];

export function Tasks() {
  const projects = useApi<{ projects: Project[] }>('ListProjects', {});
  const [projectId, setProjectId] = useState('');
  const [status, setStatus] = useState('');
  const tasks = usePaged<TaskPage>('ListTasks', { ...(projectId ? { projectId: Number(projectId) } : {}), ...(status ? { status } : {}) }, 25);
  const counts = tasks.data?.counts ?? {};
  const all = Object.values(counts).reduce((a, b) => a + b, 0);
  return (
    <section>
      <h2>Refresh tasks</h2>
      <p class="row">
        <select value={projectId} onChange={(e) => setProjectId(e.currentTarget.value)}>
          <option value="">All projects (and the chain watcher)</option>
          {projects.data?.projects.map((p) => (
            <option value={String(p.id)}>{p.name}</option>
          ))}
        </select>
        <select data-testid="tasks-status" value={status} onChange={(e) => setStatus(e.currentTarget.value)} aria-label="Status">
          <option value="">Every status ({all})</option>
          {TASK_STATUSES.map((st) => (
            <option value={st}>
              {st} ({counts[st] ?? 0})
            </option>
          ))}
        </select>
        <button class="secondary" onClick={tasks.reload}>
          Refresh
        </button>
      </p>
      <Pager paged={tasks} shown={tasks.data?.tasks.length ?? 0} testid="tasks" noun="tasks" />
      {tasks.error && <p class="error">{tasks.error}</p>}
      <TableWrap>
        <table data-testid="tasks" class="reflow">
          <thead>
            <tr>
              <th>Task</th>
              <th>Network</th>
              <th>Contract</th>
              <th>Source</th>
              <th>Status</th>
              <th>Progress</th>
              <th>Failures</th>
              <th>Created</th>
            </tr>
          </thead>
          <tbody>
            {tasks.data?.tasks.map((t) => (
              <tr key={t.id}>
                <td>{t.id}</td>
                <td>{t.network}</td>
                <td>
                  <code>{short(t.contractAddress)}</code>
                </td>
                <td>{t.source}</td>
                <td>{t.status}</td>
                <td>
                  <progress max={t.total || 1} value={t.succeeded + t.failed} /> {t.succeeded + t.failed}/{t.total}
                </td>
                <td>
                  {t.failures.length > 0 && (
                    <details>
                      <summary>{t.failed} failed</summary>
                      <ul>
                        {t.failures.map((f) => (
                          <li>
                            #{f.item}: {f.reason}
                          </li>
                        ))}
                      </ul>
                    </details>
                  )}
                  {t.lastError}
                </td>
                <td>{when(t.createdAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </TableWrap>
    </section>
  );
}
