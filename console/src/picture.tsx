import { useEffect, useState } from 'preact/hooks';
import { api } from './api.ts';

/*
 * A token's or contract's picture from this origin. While the media pipeline fetches the source and
 * renders the thumbnail, a placeholder says so; a source that cannot be shown says why.
 */

export interface PictureWire {
  field: string;
  ready: boolean;
  failureReason: string | null;
  failureMessage: string | null;
  mimeType: string | null;
  width: number | null;
  height: number | null;
  thumbnail: string | null;
  large?: string | null;
  original: string | null;
}

/** An image that shows a placeholder until it has loaded, and the failure if it does not. */
export function Picture({ src, size, alt, testid, href }: { src: string | null | undefined; size: number; alt: string; testid: string; href?: string | null }) {
  // The state belongs to one src: another src starts at 'loading' in the same render. (Reset by an effect,
  // it ran after a fast load event and put the placeholder back over a picture already shown.)
  const [seen, setSeen] = useState<{ src: typeof src; state: 'loading' | 'loaded' | 'failed' }>({ src, state: 'loading' });
  const state = seen.src === src ? seen.state : 'loading';
  const setState = (s: 'loaded' | 'failed') => setSeen({ src, state: s });
  if (!src) return <Placeholder size={size} text="thumbnail being made…" testid={`${testid}-pending`} />;
  const img = <img data-testid={testid} src={src} alt={alt} width={size} height={size} class={`picture ${state}`} onLoad={() => setState('loaded')} onError={() => setState('failed')} />;
  return (
    <span class="picture-frame" style={{ width: `${size}px`, height: `${size}px` }}>
      {state === 'loading' && <Placeholder size={size} text="thumbnail being made…" testid={`${testid}-pending`} />}
      {state === 'failed' && <Placeholder size={size} text="the thumbnail could not be made" testid={`${testid}-failed`} />}
      {href ? (
        <a href={href} target="_blank" rel="noopener">
          {img}
        </a>
      ) : (
        img
      )}
    </span>
  );
}

/** A token's picture: the first field the media pipeline could show, a placeholder while it works or saying why there is none. */
export function FieldPicture({ pictures, pending, size, testid }: { pictures: PictureWire[] | null; pending: boolean; size: number; testid: string }) {
  if (pending || !pictures) return <Placeholder size={size} text="thumbnail being made…" testid={`${testid}-pending`} />;
  const shown = pictures.find((p) => p.ready && p.thumbnail);
  if (!shown) {
    const why = pictures.find((p) => !p.ready);
    return <Placeholder size={size} text={why ? `no picture: ${why.failureReason}` : 'this token has no picture'} testid={`${testid}-none`} />;
  }
  return <Picture src={shown.thumbnail} size={size} alt={shown.field} testid={testid} href={shown.large ?? shown.original} />;
}

export function Placeholder({ size, text, testid }: { size: number; text: string; testid?: string }) {
  return (
    <span class="placeholder" data-testid={testid} style={{ width: `${size}px`, height: `${size}px` }} role="img" aria-label={text}>
      {size >= 64 ? text : '…'}
    </span>
  );
}

/** A directory entry's logo: the cached one, or put through the media pipeline now (placeholder meanwhile). */
export function Logo({ chainId, address, cached, source, size = 24 }: { chainId: number; address: string; cached?: string; source: string; size?: number }) {
  const [logo, setLogo] = useState<PictureWire | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    if (cached || !source) return;
    api<{ logo: PictureWire }>('ContractLogo', { chainID: String(chainId), contractAddress: address }).then(
      (r) => setLogo(r.logo),
      (e) => setError((e as Error).message),
    );
  }, [chainId, address, cached, source]);
  if (!cached && !source) return null;
  const path = cached ? new URL(cached, location.href).pathname.replace(/\/[^/]+$/, '/64.webp') : logo?.thumbnail?.replace(/\/256\.webp$/, '/64.webp');
  if (error || (logo && !logo.ready))
    return (
      <span class="hint" title={error ?? logo?.failureMessage ?? ''}>
        {logo?.failureReason ?? 'no logo'}
      </span>
    );
  return <Picture src={path} size={size} alt="" testid={`logo-${address}`} />;
}
