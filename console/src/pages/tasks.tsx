import { useState } from 'preact/hooks';
import { short, when } from '../api.ts';
import { useApi } from '../hooks.ts';
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

export function Tasks() {
  const projects = useApi<{ projects: Project[] }>('ListProjects', {});
  const [projectId, setProjectId] = useState('');
  const tasks = useApi<{ tasks: Task[] }>('ListTasks', projectId ? { projectId: Number(projectId) } : {});
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
        <button onClick={tasks.reload}>Refresh</button>
      </p>
      {tasks.error && <p class="error">{tasks.error}</p>}
      <table data-testid="tasks">
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
    </section>
  );
}
