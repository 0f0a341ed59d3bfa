// Raw JSON-RPC for anvil control methods and readiness probes, where a viem client would add
// retries, caching and polling we do not want.

export class RpcError extends Error {
  constructor(
    message: string,
    readonly code?: number,
    readonly data?: unknown,
  ) {
    super(message);
    this.name = 'RpcError';
  }
}

export async function rpcCall<T = unknown>(url: string, method: string, params: unknown[] = [], opts: { timeoutMs?: number } = {}): Promise<T> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    signal: AbortSignal.timeout(opts.timeoutMs ?? 10_000),
  });
  if (!res.ok) throw new RpcError(`${method} at ${url}: HTTP ${res.status}`);
  const body = (await res.json()) as { result?: T; error?: { message: string; code?: number; data?: unknown } };
  if (body.error) throw new RpcError(`${method} at ${url}: ${body.error.message}`, body.error.code, body.error.data);
  return body.result as T;
}
