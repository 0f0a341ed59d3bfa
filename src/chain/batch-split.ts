/**
 * A fetch for viem's http transport that keeps one refused JSON-RPC batch from failing all its members,
 * and learns, per endpoint, how large a batch the node takes.
 *
 * viem coalesces calls issued together into one batch. A node or provider that refuses a batch as a
 * whole (HTTP 413/5xx, or a single error object such as "batch too large" instead of an array) would
 * fail every member, including calls of callers that did nothing wrong. Here such a batch is never sent
 * again whole: it is cut into groups no larger than the node is taken to accept (the limit named in its
 * refusal, else half the refused size, halved again while groups are refused), and the answers are
 * assembled into the array viem expects: only a member that itself fails, fails. The limit is kept per
 * endpoint, so later batches over it are cut before they are sent (a provider that caps batches at 10
 * refuses every batch of 200 timestamp reads, for ever, if each retry sends the same 200). Members a
 * node left out of an otherwise good answer are asked again alone. HTTP 429 is not a refusal of the
 * batch's size: it is handed to viem as it came (its retry, the fallback, the health's rate-limit state).
 */

type Fetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** Groups re-sent at once after a refused batch: enough to finish soon, few enough not to look like a flood. */
const DEFAULT_CONCURRENCY = 8;
/** An ok array answer longer than this is taken as the batch's answers without checking every member is there. */
const ANSWER_BYTES = 65_536;

interface Member {
  id?: unknown;
}

export interface BatchSplitOptions {
  concurrency?: number;
  /** Told of every batch re-sent in parts, with how many members are re-sent (for metrics). */
  onSplit?: (members: number) => void;
  /** Told of every HTTP request a re-send makes (one member alone or a group), for metrics. */
  onResend?: (member: unknown) => void;
  /** Told when an endpoint's batch limit is learned or lowered. */
  onLimit?: (url: string, limit: number) => void;
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

/**
 * The batch size a refusal names ("limited to 10", "max batch size 10", "over the limit of 10"), when
 * it names one below the refused size; providers word it differently, so a number near a limit word.
 */
export function namedLimit(text: string, refused: number): number | undefined {
  const m = /(?:limit(?:ed)?(?: to| of| is|:)?|max(?:imum)?(?: batch)?(?: size)?(?: is| of|:)?|at most|over)\s*(\d{1,5})/i.exec(text);
  const n = m ? Number(m[1]) : Number.NaN;
  return Number.isInteger(n) && n >= 1 && n < refused ? n : undefined;
}

function keyOf(url: string | URL | Request): string {
  return typeof url === 'string' ? url : url instanceof URL ? url.href : url.url;
}

export function batchSplittingFetch(opts: BatchSplitOptions = {}): Fetch {
  const base: Fetch = opts.fetchFn ?? ((input, init) => fetch(input, init));
  const concurrency = Math.max(1, opts.concurrency ?? DEFAULT_CONCURRENCY);
  /** Per endpoint: the largest batch taken to be accepted, learned from refusals (never raised again: a cap is a setting). */
  const limits = new Map<string, number>();

  const learn = (url: string | URL | Request, refused: number, text: string): number => {
    const key = keyOf(url);
    const next = Math.max(1, namedLimit(text, refused) ?? Math.floor(refused / 2));
    const known = limits.get(key);
    if (known === undefined || next < known) {
      limits.set(key, next);
      opts.onLimit?.(key, next);
      return next;
    }
    return known;
  };

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

  /**
   * A refusal of the batch as such (its size): HTTP 413, one error object instead of an array, or an
   * HTTP error that says so. A bare 429 or 5xx is the node's state, not the batch's: it is not learned from.
   */
  const refusedWhole = (res: Response, answers: unknown[] | null, text: string) =>
    res.status === 413 || (res.ok && answers === null) || (!res.ok && res.status !== 429 && /batch|too large|too many/i.test(text));

  /**
   * The answers of `members`, in their order: sent in groups of at most the endpoint's limit; a group
   * refused whole lowers the limit and is cut again; members missing from a group's answer go alone.
   */
  const sendGroups = async (url: string | URL | Request, init: RequestInit, members: Member[], alone = false): Promise<unknown[]> => {
    const size = alone ? 1 : Math.max(1, limits.get(keyOf(url)) ?? members.length);
    const groups: Member[][] = [];
    for (let i = 0; i < members.length; i += size) groups.push(members.slice(i, i + size));
    const out: unknown[][] = new Array(groups.length);
    let next = 0;
    let thrown: unknown;
    const sendGroup = async (group: Member[]): Promise<unknown[]> => {
      if (group.length === 1) return [await sendOne(url, init, group[0])];
      const limit = limits.get(keyOf(url));
      if (limit !== undefined && group.length > limit) return sendGroups(url, init, group);
      opts.onResend?.(group);
      const res = await base(url, { ...init, body: JSON.stringify(group) });
      const text = await res.text();
      const answers = res.ok ? parseArray(text) : null;
      if (refusedWhole(res, answers, text)) {
        learn(url, group.length, text);
        return sendGroups(url, init, group);
      }
      const byId = new Map<unknown, unknown>();
      for (const a of answers ?? []) if (a && typeof a === 'object' && 'id' in a && (a as Member).id != null) byId.set((a as Member).id, a);
      const got: unknown[] = [];
      for (const m of group) got.push(byId.get(m.id) ?? (res.ok ? await sendOne(url, init, m) : failure(m.id, `HTTP ${res.status}: ${text.slice(0, 200)}`)));
      return got;
    };
    const worker = async () => {
      while (next < groups.length) {
        const i = next++;
        try {
          out[i] = await sendGroup(groups[i]);
        } catch (err) {
          // Aborted (viem's timeout) or unreachable: nothing to gain from the other members either.
          thrown = err;
          next = groups.length;
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, groups.length) }, worker));
    if (thrown !== undefined) throw thrown;
    return out.flat();
  };

  const assembled = (members: Member[], byId: Map<unknown, unknown>) =>
    new Response(JSON.stringify(members.map((m) => byId.get(m.id))), { status: 200, headers: { 'content-type': 'application/json' } });

  return async (url, init) => {
    if (typeof init?.body !== 'string' || !init.body.startsWith('[')) return base(url, init);
    const limit = limits.get(keyOf(url));
    if (limit !== undefined) {
      // A batch over what this endpoint took before is cut before it is sent, never refused again.
      const members = parseArray(init.body) as Member[] | null;
      if (members && members.length > limit) {
        const answers = await sendGroups(url, init, members);
        return assembled(members, new Map(members.map((m, i) => [m.id, answers[i]])));
      }
    }
    const res = await base(url, init);
    const text = await res.text();
    // A refusal is small (an error object); a large array is the batch's answers, left to viem unparsed
    // rather than parsed twice (eth_getLogs batches run to megabytes).
    if (res.ok && text.length > ANSWER_BYTES && text.trimStart().startsWith('[')) return new Response(text, { status: res.status, headers: res.headers });
    const members = parseArray(init.body) as Member[] | null;
    const answers = res.ok ? parseArray(text) : null;
    const sizeRefusal = refusedWhole(res, answers, text);
    // A rate limit or a bare 5xx goes back to viem as it came: its retry, the fallback and the health handle it.
    if (!members?.length || (!res.ok && !sizeRefusal)) return new Response(text, { status: res.status, statusText: res.statusText, headers: res.headers });
    const byId = new Map<unknown, unknown>();
    for (const a of answers ?? []) if (a && typeof a === 'object' && 'id' in a && (a as Member).id != null) byId.set((a as Member).id, a);
    const missing = members.filter((m) => !byId.has(m.id));
    if (missing.length === 0) return new Response(text, { status: res.status, headers: res.headers });
    opts.onSplit?.(missing.length);
    let results: unknown[];
    if (missing.length === members.length && members.length > 1 && sizeRefusal) {
      learn(url, members.length, text);
      results = await sendGroups(url, init, members);
    } else {
      results = await sendGroups(url, init, missing, true);
    }
    // Refused alone too: the node, not the batch, is the problem; viem sees its answer as it was.
    if (missing.length === members.length && results.every((r) => (r as { [FAILED]?: boolean })[FAILED])) {
      return new Response(text, { status: res.status, statusText: res.statusText, headers: res.headers });
    }
    missing.forEach((m, i) => byId.set(m.id, results[i]));
    return assembled(members, byId);
  };
}
