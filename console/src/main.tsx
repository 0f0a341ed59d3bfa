import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, whenSignedOut } from './api.ts';
import { useAction, useRoute } from './hooks.ts';
import { ActivityDetail } from './pages/activity.tsx';
import { FeeTokens, Health } from './pages/network.tsx';
import { ProjectDetail, Projects } from './pages/projects.tsx';
import { Tasks } from './pages/tasks.tsx';
import { Indexer } from './pages/indexer.tsx';
import { Directory } from './pages/directory.tsx';
import { Ecosystems } from './pages/ecosystems.tsx';
import { TokenLookup } from './pages/tokens.tsx';
import './style.css';

function SignIn({ onDone, expired }: { onDone: () => void; expired: boolean }) {
  const [token, setToken] = useState('');
  const a = useAction();
  const submit = async (e: Event) => {
    e.preventDefault();
    // The token goes to the server once and is not kept by the page; the session is a cookie the page cannot read.
    const ok = await a.run(() => api('SignIn', { token }));
    setToken('');
    if (ok) onDone();
  };
  return (
    <main class="signin">
      <h1>metarelay console</h1>
      {expired && <p class="note">Your session has ended. Sign in again.</p>}
      <form onSubmit={submit}>
        <label>
          Admin token
          <input data-testid="admin-token" type="password" autocomplete="off" value={token} onInput={(e) => setToken(e.currentTarget.value)} />
        </label>
        <button data-testid="sign-in" type="submit" disabled={a.busy || !token}>
          Sign in
        </button>
      </form>
      {a.error && (
        <p class="error" data-testid="error">
          {a.error}
        </p>
      )}
      <p class="hint">
        An admin token comes from <code>admin.tokens</code> in the config or from <code>metarelay admin create</code>.
      </p>
    </main>
  );
}

const NAV: [string, string][] = [
  ['projects', 'Projects'],
  ['tasks', 'Refresh tasks'],
  ['ecosystems', 'Ecosystems'],
  ['indexer', 'Indexer'],
  ['directory', 'Token directory'],
  ['tokens', 'Token lookup'],
  ['fees', 'Fee tokens'],
  ['health', 'Health'],
];

function Page({ route }: { route: string[] }) {
  const [section, id, sub, subId] = route;
  if (section === 'projects' && id && sub === 'tx' && subId) return <ActivityDetail projectId={Number(id)} txKey={subId} />;
  if (section === 'projects' && id) return <ProjectDetail projectId={Number(id)} tab={sub ?? 'keys'} item={subId} />;
  if (section === 'tasks') return <Tasks />;
  if (section === 'ecosystems') return <Ecosystems id={id ? Number(id) : undefined} />;
  if (section === 'indexer') return <Indexer />;
  if (section === 'directory') return <Directory />;
  if (section === 'tokens') return <TokenLookup />;
  if (section === 'fees') return <FeeTokens />;
  if (section === 'health') return <Health />;
  return <Projects />;
}

function App() {
  const [state, setState] = useState<'loading' | 'signed-in' | 'signed-out' | 'expired'>('loading');
  const route = useRoute();
  useEffect(() => {
    whenSignedOut(() => setState('expired'));
    api<{ state: string }>('Session').then(
      (r) => setState(r.state === 'valid' ? 'signed-in' : r.state === 'expired' ? 'expired' : 'signed-out'),
      () => setState('signed-out'),
    );
  }, []);
  if (state === 'loading') return <main>Loading…</main>;
  if (state !== 'signed-in') return <SignIn expired={state === 'expired'} onDone={() => setState('signed-in')} />;
  const signOut = async (everywhere = false) => {
    await api(everywhere ? 'SignOutEverywhere' : 'SignOut').catch(() => undefined);
    setState('signed-out');
  };
  return (
    <div class="shell">
      <header>
        <strong>metarelay</strong>
        <nav>
          {NAV.map(([k, label]) => (
            <a href={`#/${k}`} class={(route[0] ?? 'projects') === k ? 'active' : ''} data-testid={`nav-${k}`}>
              {label}
            </a>
          ))}
        </nav>
        <button class="link" data-testid="sign-out" onClick={() => signOut()}>
          Sign out
        </button>
        <button class="link" data-testid="sign-out-everywhere" title="End every session of this admin token" onClick={() => signOut(true)}>
          Sign out everywhere
        </button>
      </header>
      <main>
        <Page route={route} />
      </main>
    </div>
  );
}

render(<App />, document.getElementById('app')!);
