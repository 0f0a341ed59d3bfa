// Media test helpers: images generated with sharp at test time (no binary fixtures), hostile files
// built byte by byte, and a local S3 server (s3rver) for the S3 blob store.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import zlib from 'node:zlib';
import sharp from 'sharp';
import S3rver from 's3rver';
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3';
import type { BlobStore } from '../../src/media/blob-store.ts';
import type { MediaOptions } from '../../src/media/service.ts';
import { folderBlobStore } from '../../src/media/folder-store.ts';
import { s3BlobStore } from '../../src/media/s3-store.ts';

export function solidPng(width: number, height: number, color = '#3366cc'): Promise<Buffer> {
  return sharp({ create: { width, height, channels: 3, background: color } })
    .png()
    .toBuffer();
}

/** Noise does not compress, so a cut file is really missing pixel data. */
export function noisyPng(width: number, height: number): Promise<Buffer> {
  return sharp({ create: { width, height, channels: 3, background: '#000', noise: { type: 'gaussian', mean: 128, sigma: 60 } } })
    .png()
    .toBuffer();
}

export async function animatedGif(frames: number, width = 40, height = 30): Promise<Buffer> {
  const colors = ['red', 'green', 'blue', 'yellow', 'black'];
  const parts = await Promise.all(Array.from({ length: frames }, (_, i) => solidPng(width, height, colors[i % colors.length])));
  return sharp(parts, { join: { animated: true } })
    .gif()
    .toBuffer();
}

/** A valid 1×1 PNG whose header claims `width`×`height`: a decompression bomb in a few bytes. */
export async function bombPng(width: number, height: number): Promise<Buffer> {
  const png = Buffer.from(await solidPng(1, 1));
  // IHDR data starts at byte 16 (8 signature + 4 length + 4 type); its CRC follows the 13 data bytes.
  png.writeUInt32BE(width, 16);
  png.writeUInt32BE(height, 20);
  png.writeUInt32BE(zlib.crc32(png.subarray(12, 29)), 29);
  return png;
}

/** A GIF of `frames` 1×1 frames, written byte by byte (~12 bytes a frame). */
export function manyFrameGif(frames: number): Buffer {
  const header = Buffer.from([0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 1, 0, 1, 0, 0x80, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff]);
  const frame = Buffer.from([0x2c, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0x02, 0x02, 0x44, 0x01, 0x00]);
  return Buffer.concat([header, ...Array.from({ length: frames }, () => frame), Buffer.from([0x3b])]);
}

/** The smallest file file-type reads as MP4 (an ftyp box), padded to `size` bytes. */
export function fakeMp4(size: number): Buffer {
  const ftyp = Buffer.from('00000018667479706973736f6d0000020069736f6d69736f32', 'hex');
  const body = Buffer.alloc(size - ftyp.length);
  for (let i = 0; i < body.length; i++) body[i] = i % 251;
  return Buffer.concat([ftyp, body]);
}

export type BlobBackend = { name: 'folder' | 's3'; store: BlobStore; stop(): Promise<void>; endpoint?: string; dir?: string };

export function folderBackend(): BlobBackend {
  const dir = mkdtempSync(join(tmpdir(), 'metarelay-media-'));
  return { name: 'folder', store: folderBlobStore(dir), dir, stop: async () => rmSync(dir, { recursive: true, force: true }) };
}

/** A real S3 API on a local port (s3rver writes to a temporary folder). */
export async function s3Backend(): Promise<BlobBackend> {
  const dir = mkdtempSync(join(tmpdir(), 'metarelay-s3rver-'));
  const server = new S3rver({ port: 0, address: '127.0.0.1', silent: true, directory: dir });
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  const credentials = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };
  const admin = new S3Client({ endpoint, region: 'us-east-1', forcePathStyle: true, credentials });
  await admin.send(new CreateBucketCommand({ Bucket: 'metarelay-media' }));
  admin.destroy();
  const store = s3BlobStore({ bucket: 'metarelay-media', region: 'us-east-1', endpoint, forcePathStyle: true, credentials, prefix: 'm/' });
  return {
    name: 's3',
    store,
    endpoint,
    async stop() {
      store.close();
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** MediaService options for tests: two fetches at once (two per host), no stall deadline, then the overrides. */
export function testMediaOptions(o: Partial<MediaOptions> = {}): MediaOptions {
  const base = { maxBytes: 10_000_000, fetchTimeoutMs: 10_000, concurrency: 2, perHostConcurrency: 2, gatewayConcurrency: 2, stallTimeoutMs: 0, maxQueued: 100 };
  return { ...base, failureRetrySec: 3600, storeRetrySec: 60, eager: true, maxInputPixels: 100_000_000, maxFrames: 100, ...o };
}
