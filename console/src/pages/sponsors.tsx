import { useState } from 'preact/hooks';
import { api, short } from '../api.ts';
import { ConfirmButton } from '../confirm.tsx';
import { useAction, useApi } from '../hooks.ts';
import { Amount, NO_UNIT, NativeInput, ReadableWei, UsdInput, fieldWei, nativeField, useUnits, type NativeField, type Unit } from '../amount.tsx';

interface Sponsor {
  id: number;
  chainId: number;
  network: string;
  kind: string;
  address: string;
  name: string;
  active: boolean;
  maxGasLimit: number | null;
  webhookUrl: string;
  /** Masked: the console never gets a set token back. */
  webhookAuthToken: string;
  webhookAuthTokenSet: boolean;
  dailyCapWei: string | null;
  dailyCapUsd: string | null;
  walletDailyCapWei: string | null;
  walletDailyCapUsd: string | null;
  txnCapWei: string | null;
  txnCapUsd: string | null;
  totalBudgetWei: string | null;
  totalBudgetUsd: string | null;
  validFrom: string | null;
  validUntil: string | null;
  allowWallets: string[] | null;
  denyWallets: string[];
  spentTodayWei: string;
  spentTodayUsd: string;
  spentTotalWei: string;
  spentTotalUsd: string;
}

interface Network {
  chainId: number;
  name: string;
  relayer: boolean;
}

const KINDS = ['CONTRACT', 'TOKEN', 'WALLET', 'ADDRESS', 'ANY'];

/** The caps: each has a native limit (typed in native units or wei) and a dollar limit; either, both or neither. */
const CAPS = [
  ['dailyCap', 'Daily cap'],
  ['walletDailyCap', 'Per wallet per day'],
  ['txnCap', 'Per transaction'],
  ['totalBudget', 'Total budget'],
] as const;
type Cap = (typeof CAPS)[number][0];
const VALIDITY = [
  ['validFrom', 'Valid from (ISO time)'],
  ['validUntil', 'Valid until (ISO time)'],
] as const;

export function Sponsors({ projectId }: { projectId: number }) {
  const list = useApi<{ gasSponsors: Sponsor[] }>('ListGasSponsors', { projectId });
  const nets = useApi<{ networks: Network[] }>('ListNetworks', {});
  const relayed = nets.data?.networks.filter((n) => n.relayer) ?? [];
  const units = useUnits();
  const [form, setForm] = useState({ chainID: '', kind: 'CONTRACT', address: '', name: '' });
  const [dailyCap, setDailyCap] = useState<NativeField>(nativeField(''));
  const [editing, setEditing] = useState<number | null>(null);
  const set = (k: keyof typeof form) => (e: Event) => setForm({ ...form, [k]: (e.currentTarget as HTMLInputElement).value });
  const a = useAction();
  const chainID = form.chainID || relayed[0]?.name || '';
  const unitOf = (chainId: number | undefined) => (chainId != null && units.get(chainId)) || NO_UNIT;
  const addUnit = unitOf(relayed.find((n) => n.name === chainID)?.chainId);
  const cap = fieldWei(dailyCap);
  const add = async (e: Event) => {
    e.preventDefault();
    const args: Record<string, unknown> = { projectId, chainID, kind: form.kind, address: form.address.trim(), name: form.name };
    if ('wei' in cap && cap.wei) args.dailyCapWei = cap.wei;
    if (await a.run(() => api('AddGasSponsor', args))) {
      setForm({ ...form, address: '', name: '' });
      setDailyCap(nativeField(''));
      await list.reload();
    }
  };
  const update = async (s: Sponsor, patch: Record<string, unknown>) => {
    const ok = await a.run(() => api('UpdateGasSponsor', { projectId, id: s.id, ...patch }));
    if (ok) await list.reload();
    return !!ok;
  };
  const remove = async (s: Sponsor) => {
    if (await a.run(() => api('RemoveGasSponsor', { projectId, id: s.id }))) await list.reload();
  };
  return (
    <div class="stack">
      <form class="row" onSubmit={add}>
        <select data-testid="sponsor-network" value={chainID} onChange={set('chainID')}>
          {relayed.map((n) => (
            <option value={n.name}>
              {n.name} ({n.chainId})
            </option>
          ))}
        </select>
        <select data-testid="sponsor-kind" value={form.kind} onChange={set('kind')}>
          {KINDS.map((k) => (
            <option>{k}</option>
          ))}
        </select>
        <input data-testid="sponsor-address" class="addr" placeholder="0x address" value={form.address} onInput={set('address')} />
        <input placeholder="Name" value={form.name} onInput={set('name')} />
        <NativeInput label="Daily cap" testid="sponsor-daily-cap" value={dailyCap} onChange={setDailyCap} unit={addUnit} />
        <button data-testid="add-sponsor" disabled={a.busy || !chainID || 'error' in cap}>
          Add sponsorship
        </button>
      </form>
      {a.error && (
        <p class="error" data-testid="sponsor-error">
          {a.error}
        </p>
      )}
      <table data-testid="sponsors" class="reflow">
        <thead>
          <tr>
            <th>Id</th>
            <th>Network</th>
            <th>Kind</th>
            <th>Address</th>
            <th>Name</th>
            <th>On</th>
            <th>Policy</th>
            <th>Spent today</th>
            <th>Spent in all</th>
            <th>Approval webhook</th>
            <th></th>
          </tr>
        </thead>
        <tbody>
          {list.data?.gasSponsors.map((s) => [
            <tr key={s.id}>
              <td data-label="Id">{s.id}</td>
              <td data-label="Network">{s.network}</td>
              <td data-label="Kind">{s.kind}</td>
              <td data-label="Address">
                <code title={s.address}>{short(s.address, 12)}</code>
              </td>
              <td data-label="Name">{s.name}</td>
              <td data-label="On">
                <input type="checkbox" data-testid={`sponsor-active-${s.id}`} checked={s.active} onChange={() => update(s, { active: !s.active })} />
              </td>
              <td data-label="Policy" data-testid={`sponsor-policy-${s.id}`}>
                <span>
                  <PolicySummary s={s} unit={unitOf(s.chainId)} />
                </span>
              </td>
              <td data-label="Spent today">
                <Amount wei={s.spentTodayWei} unit={unitOf(s.chainId)} usd={s.spentTodayUsd !== '0' ? Number(s.spentTodayUsd) : undefined} />
              </td>
              <td data-label="Spent in all">
                <Amount wei={s.spentTotalWei} unit={unitOf(s.chainId)} usd={s.spentTotalUsd !== '0' ? Number(s.spentTotalUsd) : undefined} />
              </td>
              <td data-label="Approval webhook" data-testid={`sponsor-webhook-${s.id}`}>
                {s.webhookUrl ? <code title={s.webhookUrl}>{hostOf(s.webhookUrl)}</code> : 'none'}
                {s.webhookAuthTokenSet ? ` · token ${s.webhookAuthToken}` : ''}
              </td>
              <td>
                <button class="link" data-testid={`sponsor-edit-${s.id}`} onClick={() => setEditing(editing === s.id ? null : s.id)}>
                  {editing === s.id ? 'Close' : 'Edit'}
                </button>
                <ConfirmButton
                  testid={`sponsor-remove-${s.id}`}
                  label="Remove"
                  question={`Remove the ${s.kind} rule ${s.name || short(s.address, 12)}? Meta-transactions it covers stop being sponsored.`}
                  confirmLabel="Remove rule"
                  onConfirm={() => remove(s)}
                />
              </td>
            </tr>,
            editing === s.id && (
              <tr key={`${s.id}-edit`} class="editor-row">
                <td colSpan={11}>
                  <Editor sponsor={s} unit={unitOf(s.chainId)} onSave={async (patch) => (await update(s, patch)) && setEditing(null)} />
                </td>
              </tr>
            ),
          ])}
        </tbody>
      </table>
      <Check projectId={projectId} networks={relayed} />
    </div>
  );
}

/** The URL's host (the full URL is the cell's title). */
const hostOf = (url: string) => {
  try {
    return new URL(url).host;
  } catch {
    return short(url, 24);
  }
};

/** The rule's limits in a line: native caps readable (the exact wei on hover), dollar caps, window and lists. */
function PolicySummary({ s, unit }: { s: Sponsor; unit: Unit }) {
  const cap = (name: string, c: Cap) => {
    const wei = s[`${c}Wei`];
    const usd = s[`${c}Usd`];
    if (!wei && !usd) return null;
    return (
      <>
        {name} ≤ {wei && <Amount wei={wei} unit={{ ...unit, usdRate: null }} />}
        {wei && usd && ' and '}
        {usd && `$${usd}`}
      </>
    );
  };
  const parts = [
    cap('day', 'dailyCap'),
    cap('wallet/day', 'walletDailyCap'),
    cap('txn', 'txnCap'),
    cap('total', 'totalBudget'),
    s.maxGasLimit != null && `gas ≤ ${s.maxGasLimit}`,
    s.validFrom && `from ${s.validFrom}`,
    s.validUntil && `until ${s.validUntil}`,
    s.allowWallets && `${s.allowWallets.length} allowed wallets`,
    s.denyWallets.length > 0 && `${s.denyWallets.length} denied wallets`,
  ].filter(Boolean);
  if (!parts.length) return <>no limits</>;
  return <>{parts.map((p, i) => [i > 0 && ' · ', p])}</>;
}

/** Edits a rule's policy, gas ceiling and approval webhook. The token field is write-only: empty keeps it. */
function Editor({ sponsor: s, unit, onSave }: { sponsor: Sponsor; unit: Unit; onSave: (patch: Record<string, unknown>) => Promise<unknown> }) {
  const [native, setNative] = useState(Object.fromEntries(CAPS.map(([c]) => [c, nativeField(s[`${c}Wei`])])) as Record<Cap, NativeField>);
  const [usd, setUsd] = useState(Object.fromEntries(CAPS.map(([c]) => [c, s[`${c}Usd`] ?? ''])) as Record<Cap, string>);
  const [bad, setBad] = useState<string | null>(null);
  const [f, setF] = useState({
    validFrom: s.validFrom ?? '',
    validUntil: s.validUntil ?? '',
    maxGasLimit: s.maxGasLimit?.toString() ?? '',
    allowWallets: (s.allowWallets ?? []).join('\n'),
    denyWallets: s.denyWallets.join('\n'),
    webhookUrl: s.webhookUrl,
    webhookAuthToken: '',
    clearToken: false,
  });
  const set = (k: keyof typeof f) => (e: Event) => setF({ ...f, [k]: (e.currentTarget as HTMLInputElement).value });
  const save = (e: Event) => {
    e.preventDefault();
    const patch: Record<string, unknown> = {};
    // Only what changed is sent, so a field the operator did not touch is never rewritten.
    for (const [c, label] of CAPS) {
      const r = fieldWei(native[c]);
      if ('error' in r) return setBad(`${label}: ${r.error}`);
      if (r.wei !== (s[`${c}Wei`] ?? '')) patch[`${c}Wei`] = r.wei;
      if (usd[c].trim() !== (s[`${c}Usd`] ?? '')) patch[`${c}Usd`] = usd[c].trim();
    }
    setBad(null);
    for (const [k] of VALIDITY) if (f[k].trim() !== (s[k] ?? '')) patch[k] = f[k].trim();
    if (f.maxGasLimit.trim() !== (s.maxGasLimit?.toString() ?? '')) patch.maxGasLimit = f.maxGasLimit.trim() === '' ? '' : Number(f.maxGasLimit.trim());
    const lines = (v: string) => v.split(/[\s,]+/).filter(Boolean);
    if (f.allowWallets !== (s.allowWallets ?? []).join('\n')) patch.allowWallets = lines(f.allowWallets);
    if (f.denyWallets !== s.denyWallets.join('\n')) patch.denyWallets = lines(f.denyWallets);
    if (f.webhookUrl.trim() !== s.webhookUrl) patch.webhookUrl = f.webhookUrl.trim();
    if (f.clearToken) patch.webhookAuthToken = '';
    else if (f.webhookAuthToken) patch.webhookAuthToken = f.webhookAuthToken;
    void onSave(patch);
  };
  return (
    <form class="stack" data-testid={`sponsor-editor-${s.id}`} onSubmit={save}>
      <div class="row caps">
        {CAPS.map(([c, label]) => [
          <NativeInput label={label} testid={`edit-${c}`} unit={unit} value={native[c]} onChange={(v) => setNative({ ...native, [c]: v })} />,
          <UsdInput label={`${label} (USD)`} testid={`edit-${c}Usd`} unit={unit} value={usd[c]} onChange={(v) => setUsd({ ...usd, [c]: v })} />,
        ])}
      </div>
      <div class="row">
        {VALIDITY.map(([k, label]) => (
          <label>
            {label}
            <input class="num" data-testid={`edit-${k}`} placeholder="none" value={f[k]} onInput={set(k)} />
          </label>
        ))}
        <label>
          Gas ceiling
          <input class="num" data-testid="edit-maxGasLimit" placeholder="none" value={f.maxGasLimit} onInput={set('maxGasLimit')} />
        </label>
      </div>
      <div class="row">
        <label>
          Allowed wallets (empty: any)
          <textarea data-testid="edit-allowWallets" rows={3} value={f.allowWallets} onInput={set('allowWallets')} />
        </label>
        <label>
          Denied wallets
          <textarea data-testid="edit-denyWallets" rows={3} value={f.denyWallets} onInput={set('denyWallets')} />
        </label>
      </div>
      <div class="row">
        <label>
          Approval webhook URL
          <input class="addr" data-testid="edit-webhookUrl" placeholder="https://… (empty: none)" value={f.webhookUrl} onInput={set('webhookUrl')} />
        </label>
        <label>
          Webhook token {s.webhookAuthTokenSet ? `(set: ${s.webhookAuthToken}; empty keeps it)` : '(none)'}
          <input
            type="password"
            autocomplete="off"
            data-testid="edit-webhookAuthToken"
            placeholder={s.webhookAuthTokenSet ? 'keep' : 'none'}
            value={f.webhookAuthToken}
            onInput={set('webhookAuthToken')}
          />
        </label>
        {s.webhookAuthTokenSet && (
          <label>
            <input type="checkbox" data-testid="edit-clearToken" checked={f.clearToken} onChange={() => setF({ ...f, clearToken: !f.clearToken })} /> remove the token
          </label>
        )}
      </div>
      {bad && (
        <p class="error" data-testid="editor-error">
          {bad}
        </p>
      )}
      <button data-testid="save-sponsor">Save</button>
    </form>
  );
}

interface CheckResult {
  sponsored: boolean;
  reason: string;
  rule: { id: number } | null;
  stoppedBy: { ruleId: number; limit: string; reason: string } | null;
}

function Check({ projectId, networks }: { projectId: number; networks: Network[] }) {
  const [f, setF] = useState({ chainID: '', wallet: '', target: '', data: '', gasLimit: '' });
  const [value, setValue] = useState<NativeField>(nativeField(''));
  const units = useUnits();
  const network = networks.find((n) => n.name === (f.chainID || networks[0]?.name));
  const unit = (network && units.get(network.chainId)) || NO_UNIT;
  const valueWei = fieldWei(value);
  const set = (k: keyof typeof f) => (e: Event) => setF({ ...f, [k]: (e.currentTarget as HTMLInputElement).value });
  const [result, setResult] = useState<CheckResult | null>(null);
  const a = useAction();
  const check = async (e: Event) => {
    e.preventDefault();
    const args: Record<string, unknown> = { projectId, chainID: f.chainID || networks[0]?.name, wallet: f.wallet.trim(), target: f.target.trim() };
    if (f.data.trim()) args.data = f.data.trim();
    if ('wei' in valueWei && valueWei.wei) args.value = valueWei.wei;
    if (f.gasLimit.trim()) args.gasLimit = Number(f.gasLimit.trim());
    const r = await a.run(() => api<CheckResult>('CheckSponsorship', args));
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
        <NativeInput label="Value" testid="check-value" value={value} onChange={setValue} unit={unit} />
        <input class="num" data-testid="check-gas" placeholder="Gas (optional)" value={f.gasLimit} onInput={set('gasLimit')} />
        <button data-testid="check" disabled={'error' in valueWei}>
          Check
        </button>
      </form>
      {a.error && <p class="error">{a.error}</p>}
      {result && (
        <p data-testid="check-result" class={result.sponsored ? 'ok' : 'error'}>
          {result.sponsored ? 'Sponsored' : 'Not sponsored'}: <ReadableWei text={result.reason} unit={unit} />
          {result.stoppedBy ? ` [limit: ${result.stoppedBy.limit}, rule #${result.stoppedBy.ruleId}]` : ''}
        </p>
      )}
    </div>
  );
}
