// Media pipeline figures:
//   1. renditions per second per core: 200 generated images of mixed type and size (PNG, JPEG,
//      WebP, animated GIF, SVG; 200 to 2 400 px), each rendered to 256 px WebP, one at a time;
//   2. cached rendition serving (req/s, p99) of GET /media/b/<sha>/256.webp against a bare
//      fastify route in its own process sending the same bytes from memory (goal >= 70 %);
//   3. peak RSS while 1 000 images are fetched, probed, stored and rendered (sampled every 50;
//      it must stay flat, not grow with the count).
//
//   npx tsx bench/media.ts
//   BENCH_DB=postgres BENCH_SECONDS=10 BENCH_CONNECTIONS=50 BENCH_IMAGES=200 BENCH_RSS_IMAGES=1000
//
// Result JSON on stdout; progress on stderr.
import { spawn } from 'node:child_process';
import http from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { parseConfig } from '../src/config/load.ts';
import { buildApp } from '../src/cli/app.ts';
import { parseRendition } from '../src/media/index.ts';
import { createServices } from '../src/services.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { closeNow, dbKindFromEnv, envNumber, machineInfo, openBenchDb, progress, runBench } from './lib/harness.ts';
import { startLoadGenerator } from './lib/load.ts';
import { summarize } from './support.ts';

/** Image `i` of a deterministic mix: type and size vary with i. */
async function makeImage(i: number): Promise<[string, Buffer]> {
  const width = 200 + ((i * 373) % 2200);
  const height = 200 + ((i * 151) % 1600);
  const color = { r: (i * 37) % 256, g: (i * 91) % 256, b: (i * 53) % 256 };
  // Every other image is noise (incompressible: large files, slow decodes), the rest flat colour.
  const noise = i % 2 === 0 ? { noise: { type: 'gaussian' as const, mean: 100, sigma: 30 } } : {};
  const base = () => sharp({ create: { width, height, channels: 3, background: color, ...noise } });
  switch (i % 5) {
    case 0:
      return ['image/png', await base().png().toBuffer()];
    case 1:
      return ['image/jpeg', await base().jpeg().toBuffer()];
    case 2:
      return ['image/webp', await base().webp().toBuffer()];
    case 3: {
      const frames = await Promise.all(
        [0, 1, 2, 3].map((f) =>
          sharp({ create: { width: 320, height: 240, channels: 3, background: { ...color, r: (color.r + f * 60) % 256 } } })
            .png()
            .toBuffer(),
        ),
      );
      return [
        'image/gif',
        await sharp(frames, { join: { animated: true } })
          .gif()
          .toBuffer(),
      ];
    }
    default:
      return [
        'image/svg+xml',
        Buffer.from(
          `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}"><circle cx="${width / 2}" cy="${height / 2}" r="${Math.min(width, height) / 3}" fill="rgb(${color.r},${color.g},${color.b})"/><text x="10" y="40" font-size="30">#${i}</text></svg>`,
        ),
      ];
  }
}

/** The bare twin: fastify in its own process answering the same bytes and headers from memory. */
async function startBareServer(bytesFile: string, headers: Record<string, string>): Promise<{ url: string; stop(): void }> {
  const code = `
    import Fastify from 'fastify';
    import { readFileSync } from 'node:fs';
    const bytes = readFileSync(${JSON.stringify(bytesFile)});
    const headers = ${JSON.stringify(headers)};
    const app = Fastify({ logger: false });
    app.get('/media/b/:sha/:r', async (_req, reply) => reply.headers(headers).send(bytes));
    await app.listen({ host: '127.0.0.1', port: 0 });
    process.stdout.write(String(app.server.address().port) + '\\n');`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', code], { cwd: process.cwd(), stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout.once('data', (d: Buffer) => resolve(Number(d.toString().trim())));
    child.once('exit', (c) => reject(new Error(`bare server exited with ${c}`)));
  });
  return { url: `http://127.0.0.1:${port}`, stop: () => child.kill() };
}

runBench(async (cleanup) => {
  const imageCount = envNumber('BENCH_IMAGES', 200);
  const rssImages = envNumber('BENCH_RSS_IMAGES', 1000);
  const seconds = envNumber('BENCH_SECONDS', 10);
  const connections = envNumber('BENCH_CONNECTIONS', 50);
  const dbKind = dbKindFromEnv();

  // The origin generates image i on request (nothing is kept), so the RSS figure is metarelay's.
  const origin = http.createServer((req, res) => {
    const i = Number(/^\/img\/(\d+)$/.exec(req.url ?? '')?.[1] ?? NaN);
    if (!Number.isInteger(i)) return res.writeHead(404).end();
    void makeImage(i).then(([type, body]) => res.writeHead(200, { 'content-type': type }).end(body));
  });
  await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
  cleanup.add('stop origin', () => new Promise<void>((r) => origin.close(() => r())));
  const originUrl = `http://127.0.0.1:${(origin.address() as { port: number }).port}`;

  const mediaDir = mkdtempSync(join(tmpdir(), 'metarelay-bench-media-'));
  cleanup.add('remove media folder', () => rmSync(mediaDir, { recursive: true, force: true }));
  const bdb = await openBenchDb(dbKind, cleanup);
  const config = parseConfig({
    database: bdb.location,
    allowPrivateNetworks: true,
    logLevel: 'silent',
    inProcessWorker: false,
    media: { store: { type: 'folder', path: mediaDir }, concurrency: 1 },
  });
  const services = await createServices(config, { db: bdb.db, log: createLogger('silent') });
  cleanup.add('close services', () => services.close());
  const media = services.media!;
  const key = (i: number) => ({ chainId: 1, contract: '0x00000000000000000000000000000000000000b1', tokenId: String(i), field: 'image' as const });

  // 1. Renditions per second per core.
  progress(`ingesting ${imageCount} generated images`);
  const blobs = [];
  for (let i = 0; i < imageCount; i++) {
    const a = await media.ensure(key(i), `${originUrl}/img/${i}`);
    if (a.status !== 'READY') throw new Error(`image ${i}: ${a.failureReason} ${a.failureMessage}`);
    blobs.push(a.blob!);
  }
  const r256 = parseRendition('256.webp')!;
  const perRender: number[] = [];
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (const b of blobs) {
    const s = performance.now();
    const out = await media.rendition(b, r256);
    if (!out.ok) throw new Error(out.message);
    perRender.push(performance.now() - s);
  }
  const renderS = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const renditions = {
    images: imageCount,
    wallSeconds: Number(renderS.toFixed(2)),
    renditionsPerSecond: Number((imageCount / renderS).toFixed(1)),
    // libvips uses threads; per core = renditions per CPU-second.
    renditionsPerCpuSecond: Number((imageCount / ((cpu.user + cpu.system) / 1e6)).toFixed(1)),
    perRendition: summarize(perRender),
  };
  progress(`renditions: ${renditions.renditionsPerSecond}/s wall, ${renditions.renditionsPerCpuSecond}/CPU-s`);

  // 2. Cached rendition serving vs a bare route in its own process.
  const app = await buildApp(services);
  cleanup.add('close app', () => closeNow(app));
  await app.listen({ host: '127.0.0.1', port: 0 });
  const url = `${media.publicUrl}/media/b/${blobs[0].sha256}/256.webp`;
  const first = await fetch(url);
  const body = Buffer.from(await first.arrayBuffer());
  if (first.status !== 200) throw new Error(`GET ${url}: ${first.status}`);
  const headers: Record<string, string> = {};
  for (const h of ['content-type', 'cache-control', 'etag', 'x-content-type-options', 'content-security-policy']) headers[h] = first.headers.get(h) ?? '';
  const bytesFile = join(mediaDir, 'bare.bin');
  writeFileSync(bytesFile, body);
  const bare = await startBareServer(bytesFile, headers);
  cleanup.add('stop bare server', () => bare.stop());
  const bareUrl = `${bare.url}/media/b/${blobs[0].sha256}/256.webp`;
  const check = Buffer.from(await (await fetch(bareUrl)).arrayBuffer());
  if (!check.equals(body)) throw new Error('the bare server does not send the same bytes');
  const load = startLoadGenerator();
  cleanup.add('stop load generator', () => load.stop());
  const serve: Record<string, unknown> = {};
  for (const [name, target] of [
    ['metarelay', url],
    ['bare', bareUrl],
  ] as const) {
    await load.run({ url: target, method: 'GET' }, { connections, seconds: 2 });
    const s = await load.run({ url: target, method: 'GET' }, { connections, seconds });
    if (s.non2xx || s.errors) throw new Error(`${name}: ${s.non2xx} non-2xx, ${s.errors} errors`);
    serve[name] = { rps: Math.round(s.rps), p50Ms: s.p50Ms, p99Ms: s.p99Ms, requests: s.requests };
    progress(`serving ${name}: ${Math.round(s.rps)} req/s, p99 ${s.p99Ms} ms`);
  }
  const ratio = (serve.metarelay as { rps: number }).rps / (serve.bare as { rps: number }).rps;

  // 3. RSS while many images go through the whole pipeline (fetch, probe, store, render).
  progress(`RSS over ${rssImages} images`);
  const rss: Array<{ images: number; rssMb: number }> = [];
  let peak = 0;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 50);
  cleanup.add('stop sampler', () => clearInterval(sampler));
  const offset = imageCount;
  for (let i = 0; i < rssImages; i++) {
    const a = await media.ensure(key(offset + i), `${originUrl}/img/${offset + i}`);
    if (a.status !== 'READY') throw new Error(`image ${offset + i}: ${a.failureReason}`);
    const out = await media.rendition(a.blob!, r256);
    if (!out.ok) throw new Error(out.message);
    if ((i + 1) % 50 === 0) rss.push({ images: i + 1, rssMb: Math.round(process.memoryUsage().rss / 1e6) });
    if ((i + 1) % 100 === 0) progress(`  ${i + 1} images, RSS ${rss[rss.length - 1].rssMb} MB`);
  }
  clearInterval(sampler);
  const at = (n: number) => rss.find((x) => x.images === n)?.rssMb;

  return {
    bench: 'media',
    db: dbKind,
    machine: machineInfo(),
    renditions,
    cachedServing: { connections, seconds, bytes: body.length, ...serve, ratio: Number(ratio.toFixed(3)), goal: 0.7, meetsGoal: ratio >= 0.7 },
    rss: { images: rssImages, peakMb: Math.round(peak / 1e6), at100: at(100), at500: at(500), atEnd: at(rssImages), samples: rss },
  };
});
