import { useState } from 'preact/hooks';
import { api } from '../api.ts';
import { useAction } from '../hooks.ts';

/** A token's metadata and the resolution trace: where the document came from and every URL tried. */
export function TokenLookup() {
  const [f, setF] = useState({ chainID: '', contractAddress: '', tokenID: '' });
  const set = (k: keyof typeof f) => (e: Event) => setF({ ...f, [k]: (e.currentTarget as HTMLInputElement).value });
  const [out, setOut] = useState<{ token: unknown; explanation: { status: string; tokenUri: string | null; failureReason: string | null; trace: unknown; raw: unknown } } | null>(null);
  const a = useAction();
  const look = async (e: Event) => {
    e.preventDefault();
    setOut((await a.run(() => api('GetTokenTrace', { chainID: f.chainID.trim(), contractAddress: f.contractAddress.trim(), tokenID: f.tokenID.trim() }))) ?? null);
  };
  return (
    <section>
      <h2>Token lookup</h2>
      <form class="row" onSubmit={look}>
        <input data-testid="lookup-network" placeholder="Network (name or id)" value={f.chainID} onInput={set('chainID')} />
        <input data-testid="lookup-contract" class="addr" placeholder="Contract 0x…" value={f.contractAddress} onInput={set('contractAddress')} />
        <input data-testid="lookup-token" class="num" placeholder="Token id" value={f.tokenID} onInput={set('tokenID')} />
        <button data-testid="lookup" disabled={a.busy}>Look up</button>
      </form>
      {a.error && <p class="error">{a.error}</p>}
      {out && (
        <div class="stack">
          <dl class="facts">
            <dt>Status</dt><dd>{out.explanation.status}</dd>
            <dt>Token URI</dt><dd><code>{out.explanation.tokenUri ?? '—'}</code></dd>
            <dt>Failure</dt><dd>{out.explanation.failureReason ?? '—'}</dd>
          </dl>
          <h3>Metadata</h3>
          <pre data-testid="lookup-metadata">{JSON.stringify(out.token, null, 2)}</pre>
          <h3>Resolution trace</h3>
          <pre data-testid="lookup-trace">{JSON.stringify(out.explanation.trace, null, 2)}</pre>
        </div>
      )}
    </section>
  );
}
