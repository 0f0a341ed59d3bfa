import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { Services } from '../../services.ts';
import { EVENT_TYPES, envelope, type StoredEvent, type StreamFilter } from '../../events/outbox.ts';
import { clientAddress } from '../core/client-address.ts';
import { readAccessKey } from '../core/auth.ts';
import { MetadataErrors, RpcError, metadataAccessErrors, type ErrorDef } from '../core/errors.ts';
import { keyRefusal } from '../../access/key-kinds.ts';
import { refusalError } from '../core/access-pipeline.ts';
import { sendError } from '../core/webrpc.ts';
import type { OpenStreams } from '../core/stream-registry.ts';
import { StreamResumes, gapMessage } from './stream-resume.ts';
import { clientNetwork } from '../../util/client-net.ts';

/** What the event stream reads: keys, the outbox, the config's shares, the networks and the metrics. */
export type EventStreamDeps = Pick<Services, 'auth' | 'config' | 'events' | 'fleet' | 'metrics' | 'networks'>;

const HEARTBEAT_MS = 15_000;
/** A client this far behind in reading (bytes buffered) is cut off; it resumes with Last-Event-ID. */
const MAX_BUFFERED = 4 * 1024 * 1024;
/** When a refused stream may try again: streams end when their clients go. */
const RETRY_AFTER_SEC = 30;

const List = z
  .string()
  .max(2_000)
  .transform((v) =>
    v
      .split(',')
      .map((x) => x.trim())
      .filter(Boolean),
  );
const Query = z.object({ types: List.optional(), chains: List.optional(), lastEventId: z.string().optional(), accessKey: z.string().optional() });
const Position = z.string().regex(/^\d{1,18}$/, 'Last-Event-ID must be an event position this stream sent');

/**
 * `GET /events`: the outbox as Server-Sent Events, for one project's access key (its own events and
 * the deployment's). `types` and `chains` filter; `Last-Event-ID` (or `?lastEventId=`) resumes after
 * the event with that `id:`, within the bounds of stream-resume.ts; without it the stream starts with
 * the next event.
 */
export function registerEventStream(app: FastifyInstance, s: EventStreamDeps, registry: OpenStreams) {
  const slots = registry.slots;
  const shares = s.config.webhooks.streamShares;
  const resumes = new StreamResumes(shares, s.events.outbox, (paced) => s.metrics.streamResumePages.inc({ paced: String(paced) }), s.fleet);
  app.get('/events', async (req, reply) => {
    let filter: StreamFilter;
    let after: number | null = null;
    let release: () => void;
    let address: string;
    try {
      const outcome = await s.auth.authenticate(readAccessKey(req, true));
      if (outcome.kind !== 'ok') throw new RpcError(MetadataErrors.Unauthorized, outcome.kind === 'none' ? 'access key required: X-Access-Key header or ?accessKey=' : 'invalid access key');
      // Streams are reads: any kind of key, from the origins it allows (access/key-kinds.ts).
      const refusal = keyRefusal(outcome, false, req.headers.origin);
      if (refusal) throw refusalError(refusal, metadataAccessErrors);
      const q = Query.safeParse(req.query);
      if (!q.success) throw new RpcError(MetadataErrors.InvalidArgument, q.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
      const unknown = q.data.types?.find((t) => !(EVENT_TYPES as readonly string[]).includes(t));
      if (unknown) throw new RpcError(MetadataErrors.InvalidArgument, `unknown event type "${unknown}" (one of ${EVENT_TYPES.join(', ')})`);
      const chainIds = q.data.chains?.map((c) => {
        const id = s.networks.chainIdOf(c);
        if (id === undefined) throw new RpcError(MetadataErrors.ChainNotFound, `chain "${c}"`);
        return id;
      });
      const header = req.headers['last-event-id'];
      const resume = (Array.isArray(header) ? header[0] : header) ?? q.data.lastEventId;
      if (resume !== undefined) {
        const p = Position.safeParse(resume.trim());
        if (!p.success) throw new RpcError(MetadataErrors.InvalidArgument, p.error.issues[0].message);
        after = Number(p.data);
      }
      filter = { projectId: outcome.project.id, types: q.data.types, chainIds };
      address = clientAddress(req.ip, s.config.clientIpv6Prefix);
      if (after !== null) {
        const r = resumes.admit(address);
        if (!r.ok) {
          s.metrics.streamsRefused.inc({ share: 'reconnects' });
          throw new RpcError(MetadataErrors.RateLimited, `${r.reason}: retry later`, { 'Retry-After': String(r.retryAfterSec) });
        }
      }
      const slot = slots.take(outcome.keyId, address);
      if (!slot.ok) throw new RpcError(MetadataErrors.RateLimited, `${slot.reason}: close one, or retry later`, { 'Retry-After': String(RETRY_AFTER_SEC) });
      release = slot.release;
    } catch (err) {
      if (err instanceof RpcError) return sendError(reply, err.def as ErrorDef, err.detail, err.headers);
      throw err;
    }

    reply.hijack();
    const res = reply.raw;
    // Headers go out once the stream is attached to the reader (below): a client that saw the 200
    // gets every event written after it, not only those after the reader's first look at the head.
    res.statusCode = 200;
    for (const [k, v] of Object.entries({ 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-accel-buffering': 'no' })) res.setHeader(k, v);
    let beat = Date.now();
    let detach: (() => void) | undefined;
    let open = true;
    const end = () => {
      if (!open) return;
      open = false;
      detach?.();
      release();
      forget();
      res.end();
    };
    const forget = registry.add(end);
    req.raw.on('close', end);
    const sink = {
      filter,
      write(e: StoredEvent) {
        if (!open) return;
        res.write(`id: ${e.seq}\nevent: ${e.type}\ndata: ${JSON.stringify(envelope(e))}\n\n`);
        if (res.writableLength > MAX_BUFFERED) end();
      },
      idle() {
        if (!open || Date.now() - beat <= HEARTBEAT_MS) return;
        res.write(': keep-alive\n\n');
        beat = Date.now();
      },
    };
    try {
      let catchUp: ReturnType<StreamResumes['catchUp']> | undefined;
      if (after !== null) {
        const gap = await resumes.gapOf(after);
        s.metrics.streamResumes.inc({ outcome: gap ? 'gap' : 'caughtUp' });
        if (gap && open) {
          // From the head on: the client learns what it missed elsewhere (a full read of its state).
          res.write(gapMessage(gap, filter.projectId, shares));
          after = gap.to;
        }
        catchUp = resumes.catchUp(clientNetwork(address, shares) ?? address, () => open);
      }
      const off = await s.events.streams.subscribe(sink, after, catchUp);
      if (open) {
        detach = off;
        res.write(`retry: 2000\n\n`);
      } else off();
    } catch (err) {
      req.log.warn({ err }, 'event stream ended by an error');
      end();
    }
  });
}
