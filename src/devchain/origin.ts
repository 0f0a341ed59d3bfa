import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface DocumentOptions {
  status?: number;
  /** Default: application/json for objects and strings, application/octet-stream for bytes. */
  contentType?: string;
  /** Hold the response back this long, to test timeouts and slow origins. */
  delayMs?: number;
}

export interface OriginServer {
  url: string;
  port: number;
  /** Serves `body` at `path` (a pathname, optionally with a query string that must then match exactly). */
  setDocument(path: string, body: unknown, opts?: DocumentOptions): void;
  removeDocument(path: string): void;
  /** Requests received for `path` (pathname), or in total when omitted. */
  requestCount(path?: string): number;
  stop(): Promise<void>;
}

interface StoredDocument {
  body: Buffer;
  status: number;
  contentType: string;
  delayMs: number;
}

function toStored(body: unknown, opts: DocumentOptions): StoredDocument {
  let bytes: Buffer;
  let contentType = 'application/json';
  if (typeof body === 'string') bytes = Buffer.from(body, 'utf8');
  else if (body instanceof Uint8Array) {
    bytes = Buffer.from(body);
    contentType = 'application/octet-stream';
  } else bytes = Buffer.from(JSON.stringify(body), 'utf8');
  return { body: bytes, status: opts.status ?? 200, contentType: opts.contentType ?? contentType, delayMs: opts.delayMs ?? 0 };
}

const NOT_FOUND = toStored({ error: 'not found' }, { status: 404 });

/** An in-memory HTTP origin for token metadata documents and images. */
export function startOriginServer(opts: { port?: number; host?: string } = {}): Promise<OriginServer> {
  const host = opts.host ?? '127.0.0.1';
  const documents = new Map<string, StoredDocument>();
  const counts = new Map<string, number>();
  let total = 0;
  const pending = new Set<NodeJS.Timeout>();
  let stopped: Promise<void> | undefined;

  const respond = (req: IncomingMessage, res: ServerResponse, doc: StoredDocument) => {
    res.writeHead(doc.status, { 'content-type': doc.contentType, 'content-length': doc.body.length, 'cache-control': 'no-store' });
    res.end(req.method === 'HEAD' ? undefined : doc.body);
  };

  const server = createServer((req, res) => {
    const target = req.url ?? '/';
    const pathname = new URL(target, 'http://origin').pathname;
    total++;
    counts.set(pathname, (counts.get(pathname) ?? 0) + 1);
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      respond(req, res, toStored({ error: 'method not allowed' }, { status: 405 }));
      return;
    }
    const doc = documents.get(target) ?? documents.get(pathname) ?? NOT_FOUND;
    if (doc.delayMs <= 0) {
      respond(req, res, doc);
      return;
    }
    const timer = setTimeout(() => {
      pending.delete(timer);
      if (!res.destroyed) respond(req, res, doc);
    }, doc.delayMs);
    pending.add(timer);
  });

  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => {
      server.off('error', reject);
      const { port } = server.address() as AddressInfo;
      const urlHost = host.includes(':') ? `[${host}]` : host;
      resolve({
        url: `http://${urlHost}:${port}`,
        port,
        setDocument(path, body, docOpts = {}) {
          if (!path.startsWith('/')) throw new Error(`origin document path must start with "/": ${path}`);
          documents.set(path, toStored(body, docOpts));
        },
        removeDocument(path) {
          documents.delete(path);
        },
        requestCount(path) {
          return path === undefined ? total : (counts.get(path) ?? 0);
        },
        stop() {
          for (const t of pending) clearTimeout(t);
          pending.clear();
          stopped ??= new Promise<void>((done, fail) => {
            server.close((err) => (err ? fail(err) : done()));
            // Keep-alive sockets (and delayed responses) would otherwise hold close() open.
            server.closeAllConnections();
          });
          return stopped;
        },
      });
    });
  });
}
