// The physical anchor of the cached-read bench: a bare fastify server in its own, otherwise idle
// process, answering fixed bytes. It shares nothing with metarelay's process or the load generator,
// so metarelay/bare is what metarelay's own work per request costs on this machine.
//
// Started by bench/lib/processes.ts with the answers in a JSON file (argv[2]); sends its port over IPC.
import { readFileSync } from 'node:fs';
import Fastify from 'fastify';

interface BareAnswers {
  /** GET routes (path without query) and the JSON body each answers. */
  get: Record<string, string>;
  /** POST routes and their JSON bodies. */
  post: Record<string, string>;
}

const answers = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as BareAnswers;
const app = Fastify({ logger: false });
for (const [path, body] of Object.entries(answers.get)) app.get(path, async (_req, reply) => reply.type('application/json').send(body));
for (const [path, body] of Object.entries(answers.post)) app.post(path, async (_req, reply) => reply.type('application/json').send(body));
await app.listen({ host: '127.0.0.1', port: 0 });
const addr = app.server.address();
process.send!({ port: typeof addr === 'object' && addr ? addr.port : 0 });
process.on('disconnect', () => process.exit(0));
