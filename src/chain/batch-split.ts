/**
 * A fetch for viem's http transport that keeps one refused JSON-RPC batch from failing all its members.
 *
 * viem coalesces calls issued together into one batch. A node or provider that refuses a batch as a
 * whole (HTTP 413/429/5xx, or a single error object such as "batch too large" instead of an array)
 * would fail every member, including calls of callers that did nothing wrong. Here such a batch is sent
 * again member by member, a few at a time, and the answers are assembled into the array viem expects:
 * only a member that itself fails, fails. Members a node left out of an otherwise good answer are
 * asked again the same way.
 */

type Fetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** Members re-sent at once after a refused batch: enough to finish soon, few enough not to look like a flood. */
const DEFAULT_CONCURRENCY = 8;
/** An ok array answer longer than this is taken as the batch's answers without checking every member is there. */
const ANSWER_BYTES = 65_536;

interface Member {
  id?: unknown;
}

export interface BatchSplitOptions {
  concurrency?: number;
  /** Told of every batch re-sent member by member, with how many members are re-sent (for metrics). */
  onSplit?: (members: number) => void;
  /** Told of every member re-sent alone (for metrics). */
  onResend?: (member: unknown) => void;
  fetchFn?: Fetch;
}

function parseArray(text: string): unknown[] | null {
  try {
    const v = JSON.parse(text);
    return Array.isArray(v) ? v : null;
  } catch {
    return null;
  }
}

/** Marks an answer made here for a member whose own exchange failed (never sent on: JSON drops symbols). */
const FAILED = Symbol('failed');

/** A JSON-RPC error answer for a member whose own request failed at the HTTP level. */
function failure(id: unknown, message: string) {
  // -32603 (internal error): viem retries it and a fallback transport moves on, as for a failed request.
  return { jsonrpc: '2.0', id, error: { code: -32603, message }, [FAILED]: true };
}

export function batchSplittingFetch(opts: BatchSplitOptions = {}): Fetch {
  const base: Fetch = opts.fetchFn ?? ((input, init) => fetch(input, init));
  const concurrency = Math.max(1, opts.concurrency ?? DEFAULT_CONCURRENCY);

  /** One member alone; its answer object, or an error answer when its own exchange failed. */
  const sendOne = async (url: string | URL | Request, init: RequestInit, member: Member): Promise<unknown> => {
    opts.onResend?.(member);
    const res = await base(url, { ...init, body: JSON.stringify(member) });
    const text = await res.text();
    if (!res.ok) return failure(member.id, `HTTP ${res.status} for a single request: ${text.slice(0, 200)}`);
    try {
      const answer = JSON.parse(text);
      return Array.isArray(answer) ? answer[0] : answer;
    } catch {
      return failure(member.id, `not JSON: ${text.slice(0, 200)}`);
    }
  };

  return async (url, init) => {
    if (typeof init?.body !== 'string' || !init.body.startsWith('[')) return base(url, init);
    const res = await base(url, init);
    const text = await res.text();
    // A refusal is small (an error object); a large array is the batch's answers, left to viem unparsed
    // rather than parsed twice (eth_getLogs batches run to megabytes).
    if (res.ok && text.length > ANSWER_BYTES && text.trimStart().startsWith('[')) return new Response(text, { status: res.status, headers: res.headers });
    const members = parseArray(init.body) as Member[] | null;
    if (!members?.length) return new Response(text, { status: res.status, statusText: res.statusText, headers: res.headers });
    const answers = res.ok ? parseArray(text) : null;
    const byId = new Map<unknown, unknown>();
    for (const a of answers ?? []) if (a && typeof a === 'object' && 'id' in a && (a as Member).id != null) byId.set((a as Member).id, a);
    const missing = members.filter((m) => !byId.has(m.id));
    if (missing.length === 0) return new Response(text, { status: res.status, headers: res.headers });
    opts.onSplit?.(missing.length);
    const results: unknown[] = new Array(missing.length);
    let next = 0;
    let thrown: unknown;
    const worker = async () => {
      while (next < missing.length) {
        const i = next++;
        try {
          results[i] = await sendOne(url, init, missing[i]);
        } catch (err) {
          // Aborted (viem's timeout) or unreachable: nothing to gain from the other members either.
          thrown = err;
          next = missing.length;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, missing.length) }, worker));
    if (thrown !== undefined) throw thrown;
    // Refused alone too: the node, not the batch, is the problem; viem sees its answer as it was.
    if (missing.length === members.length && results.every((r) => (r as { [FAILED]?: boolean })[FAILED])) {
      return new Response(text, { status: res.status, statusText: res.statusText, headers: res.headers });
    }
    missing.forEach((m, i) => byId.set(m.id, results[i]));
    const body = JSON.stringify(members.map((m) => byId.get(m.id)));
    return new Response(body, { status: 200, headers: { 'content-type': 'application/json' } });
  };
}
