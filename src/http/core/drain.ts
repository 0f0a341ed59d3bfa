import type { FastifyInstance } from 'fastify';
import type { Services } from '../../services.ts';
import { WebrpcErrors } from './errors.ts';
import { sendError } from './webrpc.ts';

/** What the guard reads: whether the process drains (a getter: the services themselves are passed, not a copy). */
export type DrainDeps = Pick<Services, 'draining'>;

// Calls that start work this process would have to finish: refused while it drains, so the client
// retries on another instance; everything else (reads, receipts, status) is still answered.
const NEW_WORK = /\/rpc\/(?:Relayer\/SendMetaTxn|Metadata\/(?:EnqueueTokensForRefresh|Refresh[A-Za-z]*))$/;

export function registerDrainGuard(app: FastifyInstance, s: DrainDeps) {
  // A callback hook: it runs for every request, and an async one costs a promise each.
  app.addHook('onRequest', (req, reply, done) => {
    if (!s.draining || req.method !== 'POST' || !NEW_WORK.test(req.url.split('?')[0])) return done();
    sendError(reply, { ...WebrpcErrors.WebrpcRequestFailed, status: 503 }, 'this server is shutting down: retry (another instance takes the request)', { 'Retry-After': '1' });
  });
}
