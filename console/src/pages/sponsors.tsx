import { useState } from 'preact/hooks';
import { api, short } from '../api.ts';
import { useAction, useApi } from '../hooks.ts';

interface Sponsor {
  id: number;
  chainId: number;
  network: string;
  kind: string;
  address: string;
  name: string;
  active: boolean;
  dailyCapWei: string | null;
  spentTodayWei: string;
}

interface Network {
  chainId: number;
  name: string;
  relayer: boolean;
}

const KINDS = ['CONTRACT', 'TOKEN', 'WALLET', 'ADDRESS', 'ANY'];

export function Sponsors({ projectId }: { projectId: number }) {
  const list = useApi<{ gasSponsors: Sponsor[] }>('ListGasSponsors', { projectId });
  const nets = useApi<{ networks: Network[] }>('ListNetworks', {});
  const relayed = nets.data?.networks.filter((n) => n.relayer) ?? [];
  const [form, setForm] = useState({ chainID: '', kind: 'CONTRACT', address: '', name: '', dailyCapWei: '' });
  const set = (k: keyof typeof form) => (e: Event) => setForm({ ...form, [k]: (e.currentTarget as HTMLInputElement).value });
  const a = useAction();
  const chainID = form.chainID || relayed[0]?.name || '';
  const add = async (e: Event) => {
    e.preventDefault();
    const args: Record<string, unknown> = { projectId, chainID, kind: form.kind, address: form.address.trim(), name: form.name };
    if (form.dailyCapWei) args.dailyCapWei = form.dailyCapWei.trim();
    if (await a.run(() => api('AddGasSponsor', args))) {
      setForm({ ...form, address: '', name: '', dailyCapWei: '' });
      await list.reload();
    }
  };
  const update = async (s: Sponsor, patch: Record<string, unknown>) => {
    if (await a.run(() => api('UpdateGasSponsor', { projectId, id: s.id, ...patch }))) await list.reload();
  };
  const remove = async (s: Sponsor) => {
    if (await a.run(() => api('RemoveGasSponsor', { projectId, id: s.id }))) await list.reload();
  };
  return (
    <div class="stack">
      <form class="row" onSubmit={add}>
        <select data-testid="sponsor-network" value={chainID} onChange={set('chainID')}>
          {relayed.map((n) => (
            <option value={n.name}>{n.name} ({n.chainId})</option>
          ))}
        </select>
        <select data-testid="sponsor-kind" value={form.kind} onChange={set('kind')}>
          {KINDS.map((k) => (
            <option>{k}</option>
          ))}
        </select>
        <input data-testid="sponsor-address" class="addr" placeholder="0x address" value={form.address} onInput={set('address')} />
        <input placeholder="Name" value={form.name} onInput={set('name')} />
        <input class="num" placeholder="Daily cap (wei)" value={form.dailyCapWei} onInput={set('dailyCapWei')} />
        <button data-testid="add-sponsor" disabled={a.busy || !chainID}>Add sponsorship</button>
      </form>
      {a.error && <p class="error">{a.error}</p>}
      <table data-testid="sponsors">
        <thead>
          <tr><th>Id</th><th>Network</th><th>Kind</th><th>Address</th><th>Name</th><th>On</th><th>Daily cap (wei)</th><th>Spent today (wei)</th><th></th></tr>
        </thead>
        <tbody>
          {list.data?.gasSponsors.map((s) => (
            <tr key={s.id}>
              <td>{s.id}</td>
              <td>{s.network}</td>
              <td>{s.kind}</td>
              <td><code title={s.address}>{short(s.address, 12)}</code></td>
              <td>{s.name}</td>
              <td><input type="checkbox" data-testid={`sponsor-active-${s.id}`} checked={s.active} onChange={() => update(s, { active: !s.active })} /></td>
              <td>
                <CapEditor value={s.dailyCapWei} onSave={(v) => update(s, { dailyCapWei: v })} />
              </td>
              <td>{s.spentTodayWei}</td>
              <td><button onClick={() => remove(s)}>Remove</button></td>
            </tr>
          ))}
        </tbody>
      </table>
      <Check projectId={projectId} networks={relayed} />
    </div>
  );
}

function CapEditor({ value, onSave }: { value: string | null; onSave: (v: string) => void }) {
  const [v, setV] = useState(value ?? '');
  return (
    <form class="inline" onSubmit={(e) => (e.preventDefault(), onSave(v.trim()))}>
      <input class="num" placeholder="none" value={v} onInput={(e) => setV(e.currentTarget.value)} />
      <button class="link">Save</button>
    </form>
  );
}

function Check({ projectId, networks }: { projectId: number; networks: Network[] }) {
  const [f, setF] = useState({ chainID: '', wallet: '', target: '', data: '', value: '' });
  const set = (k: keyof typeof f) => (e: Event) => setF({ ...f, [k]: (e.currentTarget as HTMLInputElement).value });
  const [result, setResult] = useState<{ sponsored: boolean; reason: string } | null>(null);
  const a = useAction();
  const check = async (e: Event) => {
    e.preventDefault();
    const args: Record<string, unknown> = { projectId, chainID: f.chainID || networks[0]?.name, wallet: f.wallet.trim(), target: f.target.trim() };
    if (f.data.trim()) args.data = f.data.trim();
    if (f.value.trim()) args.value = f.value.trim();
    const r = await a.run(() => api('CheckSponsorship', args));
    setResult(r ?? null);
  };
  return (
    <div class="panel">
      <h3>Would this be sponsored?</h3>
      <form class="row" onSubmit={check}>
        <select value={f.chainID || networks[0]?.name} onChange={set('chainID')}>
          {networks.map((n) => (
            <option value={n.name}>{n.name}</option>
          ))}
        </select>
        <input class="addr" data-testid="check-wallet" placeholder="Wallet 0x…" value={f.wallet} onInput={set('wallet')} />
        <input class="addr" data-testid="check-target" placeholder="Target 0x…" value={f.target} onInput={set('target')} />
        <input placeholder="Calldata 0x… (optional)" value={f.data} onInput={set('data')} />
        <input class="num" placeholder="Value (wei)" value={f.value} onInput={set('value')} />
        <button data-testid="check">Check</button>
      </form>
      {a.error && <p class="error">{a.error}</p>}
      {result && (
        <p data-testid="check-result" class={result.sponsored ? 'ok' : 'error'}>
          {result.sponsored ? 'Sponsored' : 'Not sponsored'}: {result.reason}
        </p>
      )}
    </div>
  );
}
