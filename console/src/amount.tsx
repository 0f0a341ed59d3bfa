import { useEffect, useState } from 'preact/hooks';
import { api } from './api.ts';

/*
 * Amounts as people read them: native units (a few significant digits) beside dollars, the exact wei
 * on hover (title) and on click (copied). Inputs take native units or dollars, wei as an advanced
 * option, and show the converted figure as they are typed.
 */

/** How a network's amounts are shown: its native symbol and the native/USD rate now (null without a feed). */
export interface Unit {
  symbol: string;
  usdRate: number | null;
}

export const NO_UNIT: Unit = { symbol: 'ETH', usdRate: null };
const WEI = 10n ** 18n;

/** The exact value in native units: every decimal, no rounding (1 wei is 0.000000000000000001). */
export function exactNative(wei: string | bigint | null | undefined): string {
  if (wei == null || wei === '') return '—';
  const v = BigInt(wei);
  const a = v < 0n ? -v : v;
  const frac = (a % WEI).toString().padStart(18, '0').replace(/0+$/, '');
  return `${v < 0n ? '−' : ''}${a / WEI}${frac ? `.${frac}` : ''}`;
}

/** Native units rounded for reading: four decimals from 1 up, four significant digits below it. */
export function readableNative(wei: string | bigint): string {
  const v = BigInt(wei);
  if (v === 0n) return '0';
  const a = v < 0n ? -v : v;
  const sign = v < 0n ? '−' : '';
  const whole = a / WEI;
  const frac = (a % WEI).toString().padStart(18, '0');
  if (whole > 0n) {
    const f = frac.slice(0, 4).replace(/0+$/, '');
    return `${sign}${whole.toLocaleString('en-US')}${f ? `.${f}` : ''}`;
  }
  const lead = frac.search(/[1-9]/);
  const f = frac.slice(0, Math.min(18, lead + 4)).replace(/0+$/, '');
  return `${sign}0.${f}`;
}

/** Dollars: cents from a cent up, two significant digits below it. */
export function readableUsd(v: number | null | undefined): string {
  if (v == null || !Number.isFinite(v)) return '';
  const a = Math.abs(v);
  const sign = v < 0 ? '−' : '';
  if (a === 0) return '$0.00';
  if (a >= 0.01) return `${sign}$${a.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
  return `${sign}$${a.toPrecision(2)}`;
}

/** The USD value of an amount of wei at a rate (float: for display only). */
export const usdOfWei = (wei: string | bigint, rate: number | null) => (rate == null ? null : (Number(BigInt(wei)) / 1e18) * rate);

/**
 * An amount of wei in native units and dollars; the exact wei in its title and copied on click. `usd`
 * overrides the dollars (a ledger entry's value at the rate of its time).
 */
export function Amount({ wei, unit, usd, testid }: { wei: string | bigint | null | undefined; unit: Unit; usd?: number | null; testid?: string }) {
  if (wei == null || wei === '') return <span class="amount">—</span>;
  const dollars = usd !== undefined ? usd : usdOfWei(wei, unit.usdRate);
  const copy = () => navigator.clipboard?.writeText(BigInt(wei).toString()).catch(() => undefined);
  return (
    <button type="button" class="amount" data-testid={testid} data-wei={BigInt(wei).toString()} title={`${BigInt(wei).toString()} wei (click to copy)`} onClick={copy}>
      {readableNative(wei)} {unit.symbol}
      {dollars != null && <span class="usd"> · {readableUsd(dollars)}</span>}
    </button>
  );
}

let networks: Promise<Map<number, Unit>> | null = null;

/** Each network's unit (symbol and USD rate), read once per page load. */
export function useUnits(): Map<number, Unit> {
  const [units, setUnits] = useState<Map<number, Unit>>(new Map());
  useEffect(() => {
    networks ??= api<{ networks: { chainId: number; symbol: string; usdRate: number | null }[] }>('ListNetworks').then(
      (r) => new Map(r.networks.map((n) => [n.chainId, { symbol: n.symbol, usdRate: n.usdRate }])),
      () => ((networks = null), new Map()),
    );
    void networks.then(setUnits);
  }, []);
  return units;
}

/** Parses native units ("1.5") to wei; null when it is not an amount with at most 18 decimals. */
export function parseNative(text: string): bigint | null {
  const m = /^(\d*)(?:\.(\d{0,18}))?$/.exec(text.trim());
  if (!m || (m[1] === '' && !m[2])) return null;
  return BigInt(m[1] || '0') * WEI + BigInt((m[2] ?? '').padEnd(18, '0'));
}

export type NativeUnit = 'native' | 'wei';

/** What a native-amount field holds: its text and whether it is typed in native units or in wei. */
export interface NativeField {
  text: string;
  unit: NativeUnit;
}

export const nativeField = (wei: string | null | undefined): NativeField => ({ text: wei ? exactNative(wei).replace('−', '-') : '', unit: 'native' });

/** The field's value in wei ('' when empty), or an error saying what is wrong with it. */
export function fieldWei(f: NativeField): { wei: string } | { error: string } {
  const t = f.text.trim();
  if (t === '') return { wei: '' };
  if (f.unit === 'wei') return /^\d{1,78}$/.test(t) ? { wei: t } : { error: `"${t}" is not a whole number of wei` };
  const wei = parseNative(t);
  return wei == null ? { error: `"${t}" is not an amount (at most 18 decimals)` } : { wei: wei.toString() };
}

/** A cap or budget typed in native units (or in wei, the advanced option), with its conversion shown as it is typed. */
export function NativeInput({ label, value, onChange, unit, testid }: { label: string; value: NativeField; onChange: (f: NativeField) => void; unit: Unit; testid: string }) {
  const r = fieldWei(value);
  const hint = 'error' in r ? r.error : r.wei === '' ? '' : value.unit === 'wei' ? `= ${exactNative(r.wei)} ${unit.symbol}` : `= ${BigInt(r.wei).toLocaleString('en-US')} wei`;
  const dollars = 'wei' in r && r.wei !== '' ? readableUsd(usdOfWei(r.wei, unit.usdRate)) : '';
  return (
    <label class="amount-input">
      {label}
      <span class="inline">
        <input class="num" data-testid={testid} placeholder="none" value={value.text} onInput={(e) => onChange({ ...value, text: e.currentTarget.value })} />
        <select data-testid={`${testid}-unit`} value={value.unit} onChange={(e) => onChange({ ...value, unit: e.currentTarget.value as NativeUnit })} aria-label={`${label} unit`}>
          <option value="native">{unit.symbol}</option>
          <option value="wei">wei (advanced)</option>
        </select>
      </span>
      <small data-testid={`${testid}-hint`} class={'error' in r ? 'error' : 'hint'}>
        {hint}
        {dollars && ` ≈ ${dollars}`}
      </small>
    </label>
  );
}

/** A dollar cap, with what it is in native units at today's rate shown as it is typed. */
export function UsdInput({ label, value, onChange, unit, testid }: { label: string; value: string; onChange: (v: string) => void; unit: Unit; testid: string }) {
  const v = value.trim();
  const n = Number(v);
  const bad = v !== '' && (!/^\d+(\.\d+)?$/.test(v) || !Number.isFinite(n));
  const hint = bad ? `"${v}" is not a dollar amount` : v && unit.usdRate ? `≈ ${(n / unit.usdRate).toPrecision(4)} ${unit.symbol} at ${readableUsd(unit.usdRate)}/${unit.symbol}` : '';
  return (
    <label class="amount-input">
      {label}
      <span class="inline">
        <span class="prefix">$</span>
        <input class="num" data-testid={testid} placeholder="none" value={value} onInput={(e) => onChange(e.currentTarget.value)} />
      </span>
      <small data-testid={`${testid}-hint`} class={bad ? 'error' : 'hint'}>
        {hint}
      </small>
    </label>
  );
}

const GWEI = 10n ** 9n;

/** A price per gas as people read it: gwei (to 4 significant digits below 1), wei below a millionth of a gwei. */
export function readableGasPrice(wei: string | bigint | null | undefined): string {
  if (wei == null || wei === '') return '—';
  const v = BigInt(wei);
  if (v < 1000n) return `${v} wei`;
  const whole = v / GWEI;
  const frac = (v % GWEI).toString().padStart(9, '0');
  if (whole > 0n) {
    const f = frac.slice(0, 3).replace(/0+$/, '');
    return `${whole.toLocaleString('en-US')}${f ? `.${f}` : ''} gwei`;
  }
  const lead = frac.search(/[1-9]/);
  return `0.${frac.slice(0, lead + 4).replace(/0+$/, '')} gwei`;
}

/** A gas price with its exact wei on hover. */
export const GasPrice = ({ wei, testid }: { wei: string | null | undefined; testid?: string }) => (
  <span class="amount" data-testid={testid} data-wei={wei ?? ''} title={wei ? `${BigInt(wei).toLocaleString('en-US')} wei per gas` : undefined}>
    {readableGasPrice(wei)}
  </span>
);

/** A whole number with its thousands grouped (gas, counts). */
export const grouped = (n: number | string | bigint | null | undefined) => (n == null || n === '' ? '—' : BigInt(n).toLocaleString('en-US'));

/** An axis tick in native units: plain decimals to two significant digits ("0.0003", never "3e-4"). */
export function axisNative(v: number): string {
  if (v === 0) return '0';
  // Below a millionth of the native unit the decimals outgrow the axis: gwei reads shorter.
  if (v < 1e-6) return `${(v * 1e9).toLocaleString('en-US', { maximumSignificantDigits: 2, maximumFractionDigits: 9 })} gwei`;
  return v.toLocaleString('en-US', { maximumSignificantDigits: 2, maximumFractionDigits: 18 });
}

/**
 * A sentence of the server's with its figures in wei ("1000 of 5000 wei spent") as people read them: each
 * "N wei" becomes native units, with the exact wei on hover and copied on click.
 */
export function ReadableWei({ text, unit }: { text: string; unit: Unit }) {
  const parts = text.split(/(\d+ wei)/);
  return (
    <>
      {parts.map((p) => {
        const m = /^(\d+) wei$/.exec(p);
        return m ? <Amount wei={m[1]} unit={{ ...unit, usdRate: null }} /> : p;
      })}
    </>
  );
}

/** A fee token as amounts in it are shown: its symbol and decimals. */
export interface TokenUnit {
  symbol: string;
  decimals: number;
}

let feeTokens: Promise<Map<string, TokenUnit>> | null = null;

/** Each network's fee tokens by "<chainId>:<address in lower case>" (native: "<chainId>:native"), read once per page load. */
export function useFeeTokens(): Map<string, TokenUnit> {
  const [tokens, setTokens] = useState<Map<string, TokenUnit>>(new Map());
  useEffect(() => {
    feeTokens ??= api<{ networks: { chainId: number; tokens: { symbol: string; decimals: number; contractAddress: string | null }[] }[] }>('FeeTokens').then(
      (r) => new Map(r.networks.flatMap((n) => n.tokens.map((t) => [`${n.chainId}:${t.contractAddress?.toLowerCase() ?? 'native'}`, { symbol: t.symbol, decimals: t.decimals }] as const))),
      () => ((feeTokens = null), new Map()),
    );
    void feeTokens.then(setTokens);
  }, []);
  return tokens;
}

/** An amount of a token's base units in its units ("200000" of a 6-decimal token → "0.2"). */
export function tokenUnits(amount: string | bigint, decimals: number): string {
  const v = BigInt(amount);
  const base = 10n ** BigInt(decimals);
  const frac = decimals ? (v % base).toString().padStart(decimals, '0').replace(/0+$/, '') : '';
  return `${(v / base).toLocaleString('en-US')}${frac ? `.${frac}` : ''}`;
}

/** A fee paid in a token: in its units and symbol when the token is known, else the base units and its address. */
export function feeText(chainId: number, token: string | null, value: string | null, tokens: Map<string, TokenUnit>): string {
  if (!token || value == null) return '—';
  const t = tokens.get(`${chainId}:${/^0x0{40}$/i.test(token) ? 'native' : token.toLowerCase()}`);
  return t ? `${tokenUnits(value, t.decimals)} ${t.symbol}` : `${value} (${token.slice(0, 10)}…)`;
}
