import { useState } from 'preact/hooks';
import { api, short } from '../api.ts';
import { ConfirmButton } from '../confirm.tsx';
import { useAction, useApi } from '../hooks.ts';
import { Logo } from '../picture.tsx';

interface Entry {
  chainId: number;
  network: string;
  testnet: boolean;
  address: string;
  name: string;
  symbol: string;
  type: string;
  logoURI: string;
  /** The logo as cached by this origin (the page's CSP loads images from 'self' only, so the source's URL would not show). */
  cachedMedia?: { logo?: string; ogImage?: string };
  status: string;
  extensions: { featured?: boolean; featureIndex?: number };
}

/** The token directory: what wallets and marketplaces list per network; featured entries first. */
export function Directory() {
  const [page, setPage] = useState(0);
  const list = useApi<{ entries: Entry[]; more: boolean }>('ListDirectory', { page, pageSize: 50 });
  const [form, setForm] = useState({ chainID: '', contractAddress: '', featureIndex: '' });
  const set = (k: keyof typeof form) => (e: Event) => setForm({ ...form, [k]: (e.currentTarget as HTMLInputElement).value });
  const a = useAction();
  const add = async (e: Event) => {
    e.preventDefault();
    const args: Record<string, unknown> = { chainID: form.chainID.trim(), contractAddress: form.contractAddress.trim() };
    if (form.featureIndex.trim()) args.featureIndex = Number(form.featureIndex);
    if (await a.run(() => api('AddToDirectory', args))) {
      setForm({ ...form, contractAddress: '', featureIndex: '' });
      await list.reload();
    }
  };
  const feature = async (x: Entry, featureIndex: number) => {
    if (await a.run(() => api('SetDirectoryFeatureIndex', { chainID: String(x.chainId), contractAddress: x.address, featureIndex }))) await list.reload();
  };
  const remove = async (x: Entry) => {
    if (await a.run(() => api('RemoveFromDirectory', { chainID: String(x.chainId), contractAddress: x.address }))) await list.reload();
  };
  return (
    <section>
      <h2>Token directory</h2>
      <p class="hint">
        Token list imports (<code>metarelay tokenlist import</code>) and admins add entries; a removal here stays removed when a list is imported again. A feature index above 0 features an entry:
        featured entries are listed first, lowest index first.
      </p>
      <form class="row" onSubmit={add}>
        <input data-testid="directory-network" placeholder="Network (name or id)" value={form.chainID} onInput={set('chainID')} />
        <input data-testid="directory-address" class="addr" placeholder="Contract 0x…" value={form.contractAddress} onInput={set('contractAddress')} />
        <input class="num" placeholder="Feature index (optional)" value={form.featureIndex} onInput={set('featureIndex')} />
        <button data-testid="directory-add" disabled={a.busy || !form.chainID || !form.contractAddress}>
          Add
        </button>
      </form>
      {(a.error || list.error) && <p class="error">{a.error ?? list.error}</p>}
      <table data-testid="directory">
        <thead>
          <tr>
            <th></th>
            <th>Network</th>
            <th>Name</th>
            <th>Symbol</th>
            <th>Type</th>
            <th>Address</th>
            <th>Feature index</th>
            <th></th>
          </tr>
        </thead>
        <tbody>
          {list.data?.entries.map((x) => (
            <tr key={`${x.chainId}:${x.address}`}>
              <td>
                <Logo chainId={x.chainId} address={x.address} cached={x.cachedMedia?.logo} source={x.logoURI} />
              </td>
              <td>
                {x.network}
                {x.testnet ? ' (testnet)' : ''}
              </td>
              <td>{x.name || <em>{x.status === 'AVAILABLE' ? '—' : 'not read yet'}</em>}</td>
              <td>{x.symbol}</td>
              <td>{x.type}</td>
              <td>
                <code title={x.address}>{short(x.address, 12)}</code>
              </td>
              <td>
                <FeatureEditor value={x.extensions.featureIndex ?? 0} onSave={(v) => feature(x, v)} />
              </td>
              <td>
                <ConfirmButton testid={`directory-remove-${x.address}`} label="Remove" question={`Remove ${x.address} from the directory?`} confirmLabel="Remove entry" onConfirm={() => remove(x)} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <div class="row">
        <button disabled={page === 0} onClick={() => setPage(page - 1)}>
          Previous
        </button>
        <span>Page {page + 1}</span>
        <button disabled={!list.data?.more} onClick={() => setPage(page + 1)}>
          Next
        </button>
      </div>
    </section>
  );
}

function FeatureEditor({ value, onSave }: { value: number; onSave: (v: number) => void }) {
  const [v, setV] = useState(String(value));
  const changed = v.trim() !== String(value);
  return (
    <span class="row">
      <input class="num" value={v} onInput={(e) => setV(e.currentTarget.value)} />
      {changed && <button onClick={() => onSave(Number(v))}>Save</button>}
    </span>
  );
}
