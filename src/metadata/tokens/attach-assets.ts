// The media stage of a token answer: the `assets` of tokens with stored media (and, if configured,
// the cached `image`) put into their serialised views.

import type { Logger } from '../../telemetry/logger.ts';
import type { TokenMediaHooks } from './resolver-types.ts';
import type { ResourceStatus } from './token-view.ts';

/** Adds `assets` (and, if configured, the cached `image`) to the serialised tokens that have stored media. */
export async function attachAssets(media: TokenMediaHooks, log: Logger, chainId: number, contract: string, ids: string[], statuses: ResourceStatus[], json: string[]): Promise<void> {
  const withMetadata = ids.filter((_, i) => statuses[i] !== 'NOT_AVAILABLE');
  if (!withMetadata.length) return;
  let assets: Awaited<ReturnType<TokenMediaHooks['assetsFor']>>;
  try {
    assets = await media.assetsFor(chainId, contract, withMetadata);
  } catch (err) {
    // Media is an extra: an answer without it beats no answer.
    log.warn({ err, chainId, contract }, 'token assets unavailable');
    return;
  }
  ids.forEach((id, i) => {
    const entry = statuses[i] !== 'NOT_AVAILABLE' ? assets.get(id) : undefined;
    if (!entry?.json) return;
    const image = media.rewriteImage ? entry.list.find((a) => a.metadataField === 'image') : undefined;
    if (image) {
      const obj = JSON.parse(json[i]) as Record<string, unknown>;
      json[i] = JSON.stringify({ ...obj, image: image.url, assets: entry.list });
    } else {
      // The view ends with "}": splicing keeps the cached serialisation of the record.
      json[i] = `${json[i].slice(0, -1)},"assets":${entry.json}}`;
    }
  });
}
