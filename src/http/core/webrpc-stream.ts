import { clientAddress } from './client-address.ts';
import { RpcError, WebrpcErrors, toWire, type ErrorDef } from './errors.ts';
import type { OpenStreams } from './stream-registry.ts';
import { STREAMED, type RpcContext } from './webrpc.ts';

/**
 * The generated clients give up on a stream silent for 11 s (indexer.gen.ts sseResponse): an empty
 * line, which they skip, is sent well within that.
 */
const PING_MS = 5_000;
/** A client this far behind in reading (bytes buffered) is cut off, as `GET /events` does. */
const MAX_BUFFERED = 4 * 1024 * 1024;
const RETRY_AFTER_SEC = 30;

export interface StreamDeps {
  open: OpenStreams;
  clientIpv6Prefix: number;
  /** The service's RateLimited error, for a caller past a cap. */
  rateLimited: ErrorDef;
}

/**
 * What feeds one stream: called once the stream is open with `send` (frames, each the JSON text of one
 * line: `{"receipt":…}`) and `end` (the source gives up: the client is told why and may reconnect);
 * returns the function that detaches it.
 */
export type StreamFeed = (send: (frames: readonly string[]) => void, end: (why: string) => void) => Promise<() => void> | (() => void);

/**
 * Answers a webrpc stream method in its wire shape: 200, then one JSON frame per line (`{"receipt":…}`),
 * empty lines as pings, `{"webrpcError":…}` (WebrpcStreamLost: the client may reconnect) as a last frame
 * when the server ends it. Fed by `feed`. It ends when the client goes or the server closes. Capped per
 * access key, client address and process with `GET /events` (they share slots).
 */
export async function serveWebrpcStream(ctx: RpcContext, deps: StreamDeps, feed: StreamFeed): Promise<typeof STREAMED> {
  const slot = deps.open.slots.take(ctx.keyId, clientAddress(ctx.request.ip, deps.clientIpv6Prefix));
  if (!slot.ok) throw new RpcError(deps.rateLimited, `${slot.reason}: close one, or retry later`, { 'Retry-After': String(RETRY_AFTER_SEC) });

  const { reply } = ctx;
  reply.hijack();
  const res = reply.raw;
  // Headers the router set (Webrpc) go out with the stream's own.
  const headers: Record<string, string> = { 'content-type': 'application/x-ndjson', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' };
  for (const [k, v] of Object.entries(reply.getHeaders())) if (typeof v === 'string') headers[k] = v;
  // Headers go out once the stream is attached to the reader: a client that saw the stream open
  // (onOpen) gets every event from then on.
  res.statusCode = 200;
  for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);

  let open = true;
  let detach: (() => void) | undefined;
  const ping = setInterval(() => open && res.write('\n'), PING_MS);
  const end = (why?: string) => {
    if (!open) return;
    open = false;
    clearInterval(ping);
    detach?.();
    slot.release();
    forget();
    if (why && !res.destroyed) res.write(`${JSON.stringify({ webrpcError: toWire(WebrpcErrors.WebrpcStreamLost, why) })}\n`);
    res.end();
  };
  const forget = deps.open.add(() => end('the server is shutting down: reconnect'));
  // The response's close, not the request's: a request with a body emits 'close' once it is read.
  res.on('close', () => end());

  const send = (frames: readonly string[]) => {
    if (!open) return;
    for (const f of frames) res.write(`${f}\n`);
    if (res.writableLength > MAX_BUFFERED) end();
  };
  try {
    const off = await feed(send, (why) => end(why));
    if (open) {
      detach = off;
      res.flushHeaders();
    } else off();
  } catch (err) {
    ctx.request.log.warn({ err }, 'webrpc stream ended by an error');
    end('the stream could not be started: reconnect');
  }
  return STREAMED;
}
