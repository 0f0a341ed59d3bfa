import type { Readable } from 'node:stream';

// Where media bytes live. Keys are content-derived ("o/<sha256>" for an original,
// "r/<sha256>/<rendition>" for a rendition), so a key's bytes never change once
// written: writers race harmlessly and readers never see a half-written blob.

export interface BlobStore {
  readonly kind: 'folder' | 's3';
  put(key: string, bytes: Buffer, contentType: string): Promise<void>;
  /** The whole blob, or undefined when it is not stored. */
  get(key: string): Promise<Buffer | undefined>;
  /** Bytes [start, end] inclusive of a stored blob (Range requests on video and audio). */
  getRange(key: string, start: number, end: number): Promise<Buffer | undefined>;
  /** A stream of bytes [start, end] (the whole blob without a range): large originals are never held in memory. */
  stream(key: string, range?: { start: number; end: number }): Promise<Readable | undefined>;
  /** Its size in bytes, or undefined when it is not stored. */
  size(key: string): Promise<number | undefined>;
  /** Removes the blob and, for an original, every rendition under it. */
  delete(key: string): Promise<void>;
  /** Every key under a prefix (garbage collection and tests). */
  list(prefix: string): Promise<string[]>;
  /** Every key under a prefix with when it was written: the orphan sweep leaves young ones alone. */
  entries(prefix: string): Promise<Array<{ key: string; modifiedAt: Date }>>;
  close(): void;
}

const SHA256 = /^[0-9a-f]{64}$/;
const RENDITION = /^[a-z0-9.-]{1,40}$/;

export function originalKey(sha256: string): string {
  if (!SHA256.test(sha256)) throw new Error('not a sha256 hex digest');
  return `o/${sha256}`;
}

export function renditionKey(sha256: string, rendition: string): string {
  if (!SHA256.test(sha256) || !RENDITION.test(rendition)) throw new Error('bad rendition key');
  return `r/${sha256}/${rendition}`;
}

export function renditionPrefix(sha256: string): string {
  if (!SHA256.test(sha256)) throw new Error('not a sha256 hex digest');
  return `r/${sha256}/`;
}
