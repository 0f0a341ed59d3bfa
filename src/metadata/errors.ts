// Failure vocabulary for metadata fetching. Failures are values so callers can
// persist them, schedule retries and explain resolution without try/catch.

export type FetchFailureReason =
  | 'UNREACHABLE'
  | 'TIMEOUT'
  | 'ABORTED'
  | 'TOO_LARGE'
  | 'INVALID_JSON'
  | 'NOT_AN_OBJECT'
  // Nested deeper than MAX_DOCUMENT_DEPTH (document.ts).
  | 'TOO_DEEP'
  | 'BAD_ENCODING'
  | 'INVALID_URI'
  | 'UNSUPPORTED_SCHEME'
  | 'BLOCKED_ADDRESS'
  | 'TOO_MANY_REDIRECTS'
  // For callers: the token has no URI at all (e.g. tokenURI reverted). The fetcher never produces it.
  | 'NOT_FOUND'
  | `HTTP_${number}`;

/** One network hop or local decode, in the order it happened. */
export type Attempt = {
  url: string;
  status?: number;
  bytes: number;
  ms: number;
  error?: FetchFailureReason;
  redirectedTo?: string;
};

export type FetchFailure = {
  ok: false;
  reason: FetchFailureReason;
  retryable: boolean;
  retryAfterMs?: number;
  message: string;
  trace: Attempt[];
  /**
   * The document is known to be gone, not merely unreachable: this service's own collection token or
   * collection that is unpublished or deleted (collections/local-fetcher.ts). Its last good document
   * is dropped rather than kept, as it is for an origin that fails.
   */
  withdrawn?: true;
};

export function httpReason(status: number): FetchFailureReason {
  return `HTTP_${status}`;
}

export function statusOf(reason: FetchFailureReason): number | null {
  const match = /^HTTP_(\d+)$/.exec(reason);
  return match ? Number(match[1]) : null;
}

// Transient conditions only: retrying a 404 or a malformed document cannot help.
export function isRetryable(reason: FetchFailureReason): boolean {
  const status = statusOf(reason);
  if (status !== null) return status >= 500 || status === 408 || status === 425 || status === 429;
  return reason === 'UNREACHABLE' || reason === 'TIMEOUT' || reason === 'ABORTED';
}

export function failure(reason: FetchFailureReason, message: string, trace: Attempt[], retryAfterMs?: number): FetchFailure {
  const result: FetchFailure = { ok: false, reason, retryable: isRetryable(reason), message, trace };
  if (retryAfterMs !== undefined) result.retryAfterMs = retryAfterMs;
  return result;
}
