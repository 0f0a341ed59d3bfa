import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Metrics } from '../../telemetry/metrics.ts';

/**
 * `metrics.listen`: `GET /metrics` without a credential on an address of its own, for a Prometheus
 * that scrapes a private interface (the API port answers /metrics to an admin token only). Nothing
 * else is served here: the address is the access control, so it should not be a public one.
 */
export async function startMetricsServer(metrics: Metrics, listen: { host: string; port: number }): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' || path !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('only GET /metrics is served on this address\n');
      return;
    }
    metrics.registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
      (err: Error) => res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end(`metrics could not be read: ${err.message}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: listen.host, port: listen.port }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${listen.host.includes(':') ? `[${listen.host}]` : listen.host}:${port}/metrics`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
