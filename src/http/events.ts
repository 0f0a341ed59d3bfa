import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { Services } from '../services.ts';
import { EVENT_TYPES, envelope } from '../events/outbox.ts';
import { readAccessKey } from './auth.ts';
import { MetadataErrors, RpcError, type ErrorDef } from './errors.ts';
import { sendError } from './webrpc.ts';

const POLL_MS = 500;
const HEARTBEAT_MS = 15_000;
const BATCH = 500;

const List = z
  .string()
  .max(2_000)
  .transform((v) => v.split(',').map((x) => x.trim()).filter(Boolean));
const Query = z.object({ types: List.optional(), chains: List.optional(), lastEventId: z.string().optional(), accessKey: z.string().optional() });
const Position = z.string().regex(/^\d{1,18}$/, 'Last-Event-ID must be an event position this stream sent');

/**
 * `GET /events`: the outbox as Server-Sent Events, for one project's access key (its own events and
 * the deployment's). `types` and `chains` filter; `Last-Event-ID` (or `?lastEventId=`) resumes after
 * the event with that `id:`; without it the stream starts with the next event.
 */
export function registerEventStream(app: FastifyInstance, s: Services) {
  // Open streams end when the server closes, or they would hold its close open forever.
  const streams = new Set<() => void>();
  app.addHook('preClose', async () => {
    for (const end of streams) end();
  });
  app.get('/events', async (req, reply) => {
    let filter: { projectId: number; types?: string[]; chainIds?: number[] };
    let after: number;
    try {
      const outcome = await s.auth.authenticate(readAccessKey(req, true));
      if (outcome.kind !== 'ok') throw new RpcError(MetadataErrors.Unauthorized, outcome.kind === 'none' ? 'access key required: X-Access-Key header or ?accessKey=' : 'invalid access key');
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
      } else {
        await s.events.outbox.sequence();
        after = await s.events.outbox.head();
      }
      filter = { projectId: outcome.project.id, types: q.data.types, chainIds };
    } catch (err) {
      if (err instanceof RpcError) return sendError(reply, err.def as ErrorDef, err.detail, err.headers);
      throw err;
    }

    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-accel-buffering': 'no' });
    res.write(`retry: 2000\n\n`);
    let open = true;
    let wake: (() => void) | undefined;
    const offBell = s.events.bell.on(() => setTimeout(() => wake?.(), 5).unref());
    const end = () => {
      open = false;
      wake?.();
    };
    streams.add(end);
    req.raw.on('close', end);
    let beat = Date.now();
    try {
      while (open) {
        await s.events.outbox.sequence();
        const batch = await s.events.outbox.since(after, { ...filter, limit: BATCH });
        for (const e of batch) {
          res.write(`id: ${e.seq}\nevent: ${e.type}\ndata: ${JSON.stringify(envelope(e))}\n\n`);
          after = e.seq!;
        }
        if (batch.length === BATCH) continue;
        if (Date.now() - beat > HEARTBEAT_MS) {
          res.write(': keep-alive\n\n');
          beat = Date.now();
        }
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, POLL_MS);
          wake = () => {
            clearTimeout(t);
            resolve();
          };
        });
        wake = undefined;
      }
    } catch (err) {
      req.log.warn({ err }, 'event stream ended by an error');
    } finally {
      offBell();
      streams.delete(end);
      res.end();
    }
  });
}
