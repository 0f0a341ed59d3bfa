// The load generator runs in its own process so it never shares an event loop with the server
// being measured; the parent drives it over IPC (see load.ts).
import autocannon from 'autocannon';
import type { LoadRequest, LoadResponse } from './load.ts';

process.on('message', (msg: LoadRequest) => {
  void (async () => {
    let reply: LoadResponse;
    try {
      const r = await autocannon({
        url: msg.target.url,
        method: msg.target.method,
        headers: msg.target.headers,
        body: msg.target.body,
        connections: msg.connections,
        duration: msg.seconds,
      });
      reply = {
        id: msg.id,
        ok: true,
        summary: {
          durationS: r.duration,
          requests: r.requests.total,
          rps: r.requests.total / r.duration,
          p50Ms: r.latency.p50,
          p99Ms: r.latency.p99,
          meanMs: r.latency.mean,
          non2xx: r.non2xx,
          errors: r.errors,
          timeouts: r.timeouts,
        },
      };
    } catch (err) {
      reply = { id: msg.id, ok: false, error: err instanceof Error ? (err.stack ?? err.message) : String(err) };
    }
    process.send!(reply);
  })();
});

// Exit with the parent rather than outlive it as an orphan.
process.on('disconnect', () => process.exit(0));
