// The media pipeline's throughput on ordinary traffic (issue 54's bench): images fetched, probed and stored
// per second when a collection's images are asked for all at once, from one origin host and from four,
// each answering after BENCH_ORIGIN_DELAY_MS. Default media settings; sets no new config, so it runs on
// any version of the service and before/after compare like for like.
//
//   npx tsx bench/media-fetch-throughput.ts
//   BENCH_DB=postgres BENCH_IMAGES=200 BENCH_ROUNDS=3 BENCH_ORIGIN_DELAY_MS=20
//
// Result JSON on stdout; progress on stderr.
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { parseConfig } from '../src/config/load.ts';
import { createServices } from '../src/services.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { dbKindFromEnv, envNumber, machineInfo, openBenchDb, progress, runBench } from './lib/harness.ts';

runBench(async (cleanup) => {
  const images = envNumber('BENCH_IMAGES', 200);
  const rounds = envNumber('BENCH_ROUNDS', 3);
  const delayMs = Number(process.env.BENCH_ORIGIN_DELAY_MS ?? 20);
  // Small distinct PNGs made up front: the figure is the pipeline's, not the origin's.
  const total = images * rounds * 2;
  const bodies: Buffer[] = [];
  for (let i = 0; i < total; i++) {
    bodies.push(
      await sharp({ create: { width: 96, height: 96, channels: 3, background: { r: i % 256, g: (i >> 8) % 256, b: (i * 7) % 256 } } })
        .png()
        .toBuffer(),
    );
  }
  const origins: string[] = [];
  for (let h = 0; h < 4; h++) {
    const server = http.createServer((req, res) => {
      const i = Number(/^\/img\/(\d+)$/.exec(req.url ?? '')?.[1] ?? NaN);
      if (!Number.isInteger(i) || !bodies[i]) return res.writeHead(404).end();
      setTimeout(() => res.writeHead(200, { 'content-type': 'image/png' }).end(bodies[i]), delayMs);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanup.add('stop origin', () => new Promise<void>((r) => server.close(() => r())));
    origins.push(`http://127.0.0.1:${(server.address() as { port: number }).port}`);
  }
  const mediaDir = mkdtempSync(join(tmpdir(), 'metarelay-bench-media-'));
  cleanup.add('remove media folder', () => rmSync(mediaDir, { recursive: true, force: true }));
  const bdb = await openBenchDb(dbKindFromEnv(), cleanup);
  const config = parseConfig({ database: bdb.location, allowPrivateNetworks: true, logLevel: 'silent', inProcessWorker: false, media: { store: { type: 'folder', path: mediaDir } } });
  const services = await createServices(config, { db: bdb.db, log: createLogger('silent') });
  cleanup.add('close services', () => services.close());
  const media = services.media!;
  const key = (i: number) => ({ chainId: 1, contract: '0x00000000000000000000000000000000000000b2', tokenId: String(i), field: 'image' as const });

  let next = 0;
  /** `images` images asked for at once, spread over `hosts` origins: images stored per second. */
  const round = async (hosts: number) => {
    const ids = Array.from({ length: images }, () => next++);
    const t0 = performance.now();
    const out = await Promise.all(ids.map((i) => media.ensure(key(i), `${origins[i % hosts]}/img/${i}`)));
    const s = (performance.now() - t0) / 1000;
    const failed = out.filter((a) => a.status !== 'READY').length;
    if (failed) throw new Error(`${failed} images not stored: ${out.find((a) => a.status !== 'READY')?.failureReason}`);
    return +(images / s).toFixed(1);
  };
  const result: Record<string, number[]> = { oneHost: [], fourHosts: [] };
  for (let r = 0; r < rounds; r++) {
    result.oneHost.push(await round(1));
    result.fourHosts.push(await round(4));
    progress(`round ${r + 1}: one host ${result.oneHost.at(-1)} images/s, four hosts ${result.fourHosts.at(-1)} images/s`);
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  return {
    bench: 'media-fetch-throughput',
    db: dbKindFromEnv(),
    machine: machineInfo(),
    images,
    originDelayMs: delayMs,
    imagesPerSec: result,
    medianImagesPerSec: { oneHost: median(result.oneHost), fourHosts: median(result.fourHosts) },
    loadavg: os.loadavg().map((x) => +x.toFixed(2)),
  };
});
