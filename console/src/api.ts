// Every page action is one POST to the console's admin API. The session rides in an HttpOnly
// cookie the browser sends by itself: this code never sees a secret.

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly error: string,
    readonly cause: string,
  ) {
    super(`${error}: ${cause}`);
  }
}

type Listener = () => void;
let onSignedOut: Listener = () => {};
export const whenSignedOut = (fn: Listener) => (onSignedOut = fn);

export async function api<T = any>(method: string, args: Record<string, unknown> = {}): Promise<T> {
  const res = await fetch(`/rpc/Console/${method}`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    credentials: 'same-origin',
    body: JSON.stringify(args),
  });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) {
    const err = new ApiError(res.status, body.error ?? 'Error', body.cause ?? res.statusText);
    if (err.error === 'Unauthorized' || err.error === 'SessionExpired') {
      if (method !== 'SignIn') onSignedOut();
    }
    throw err;
  }
  return body as T;
}

export const short = (s: string | null | undefined, n = 10) => (!s ? '' : s.length > n + 4 ? `${s.slice(0, n)}…${s.slice(-4)}` : s);
/** A moment as the reader's local date and time, with the time zone named ("Dec 7, 2026, 08:14:03 UTC"). */
export const when = (iso: string | number | Date | null | undefined) =>
  iso == null || iso === ''
    ? '—'
    : new Date(iso).toLocaleString('en-US', { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit', hourCycle: 'h23', timeZoneName: 'short' });
