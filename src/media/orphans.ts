// The collection stage for what a crash left behind: blob rows no asset references, and bytes in the
// blob store with no row (orphan-sweep.ts runs it periodically).

import type { Logger } from '../telemetry/logger.ts';
import type { BlobStore } from './blob-store.ts';
import type { MediaStore } from './media-store.ts';

export type OrphanCounts = { rows: number; originals: number; renditions: number };

/**
 * What a crash can leave behind, collected:
 * - blob rows no asset references (an asset let go of them, and the process stopped before `release`);
 * - originals in the blob store with no blob row (bytes put by an ingest whose transaction never
 *   committed), older than `graceSec` so an ingest in progress is never raced;
 * - renditions of a hash with no blob row (rendered while the blob was being collected), as old.
 * Safe to run in several processes at once: every deletion happens under the blob row's lock.
 */
export async function sweepOrphans(
  d: { store: MediaStore; blobs: BlobStore; log: Logger; release: (sha256: string) => Promise<boolean>; forgetRenditions: (sha256: string) => void },
  graceSec: number,
  batch: number,
): Promise<OrphanCounts> {
  const out = { rows: 0, originals: 0, renditions: 0 };
  for (const sha of await d.store.unreferencedBlobs(batch)) if (await d.release(sha)) out.rows++;
  const before = Date.now() - graceSec * 1000;
  // One listing of the store for both kinds (the folder store walks the whole tree for any prefix).
  const aged = (await d.blobs.entries('')).filter((e) => e.modifiedAt.getTime() < before).map((e) => e.key);
  const old = (prefix: string) => aged.filter((k) => k.startsWith(prefix));
  const hashOf = (key: string) => key.split('/')[1];
  const originals = old('o/');
  const knownO = await d.store.knownBlobs(originals.map(hashOf));
  // Deleting an original deletes its renditions with it.
  const gone = new Set<string>();
  for (const key of originals) {
    const sha = hashOf(key);
    if (knownO.has(sha)) continue;
    if (await d.store.dropUnclaimed(sha, () => d.blobs.delete(key))) {
      gone.add(sha);
      out.originals++;
    }
  }
  const renditions = old('r/').filter((k) => !gone.has(hashOf(k)));
  const knownR = await d.store.knownBlobs([...new Set(renditions.map(hashOf))]);
  for (const key of renditions) {
    const sha = hashOf(key);
    if (knownR.has(sha)) continue;
    if (await d.store.dropUnclaimed(sha, () => d.blobs.delete(key))) {
      d.forgetRenditions(sha);
      out.renditions++;
    }
  }
  if (out.rows + out.originals + out.renditions) d.log.info(out, 'media orphans collected');
  return out;
}
