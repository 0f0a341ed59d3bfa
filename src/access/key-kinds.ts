import type { KeyKind } from '../store/access-keys.ts';

/**
 * The one rule of what a kind of key may do, for every route (http/core/access-pipeline.ts and the event
 * stream ask it). Sequence's model: a publishable key ships in apps, so anyone who opens the app has it;
 * it reads, relays and streams, from the origins it allows. A secret key is a backend's: it may also
 * write the project's state, and is refused when a browser sends it (an Origin header), so one leaked
 * into a web app stops working rather than working for whoever reads the app's code.
 */
export type KeyRefusal = { reason: 'secretRequired' | 'secretFromBrowser' | 'origin'; detail: string };

export interface KindedKey {
  keyKind: KeyKind;
  allowedOrigins: readonly string[] | null;
}

/** Why this key may not make this request (`writes`: the route changes project state), or null. */
export function keyRefusal(key: KindedKey, writes: boolean, origin: string | undefined): KeyRefusal | null {
  if (key.keyKind === 'secret') {
    if (origin !== undefined)
      return { reason: 'secretFromBrowser', detail: 'a secret key cannot be used from a web app (the request has an Origin header): call from a backend, or use a publishable key' };
    return null;
  }
  if (writes) return { reason: 'secretRequired', detail: 'a publishable key cannot change project state: use a secret key (Authorization: Bearer <secret key>) from a backend' };
  if (origin !== undefined && key.allowedOrigins && !key.allowedOrigins.includes(normalOrigin(origin) ?? '')) {
    return { reason: 'origin', detail: `origin ${origin.slice(0, 200)} is not allowed for this access key` };
  }
  return null;
}

/** `scheme://host[:port]` as browsers send it in Origin (lower case, default port dropped), or null when it is not an http(s) origin. */
export function normalOrigin(text: string): string | null {
  try {
    const u = new URL(text.trim());
    if (u.protocol !== 'http:' && u.protocol !== 'https:') return null;
    if (u.pathname !== '/' || u.search || u.hash || u.username || u.password) return null;
    return u.origin;
  } catch {
    return null;
  }
}
