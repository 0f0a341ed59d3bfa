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
export const when = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : '—');
