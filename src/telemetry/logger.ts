import { pino, type Logger } from 'pino';
import { redactSecrets } from './redact.ts';

export type { Logger };

export function createLogger(level: string, opts: { pretty?: boolean } = {}): Logger {
  // Lines are written asynchronously: serve logs every request, and a write(2) per line was a
  // measurable part of a cached read. Under load the lines that come while a write is in flight
  // go out together in the next one; pino flushes what is left when the process exits.
  const destination = level === 'silent' ? undefined : pino.destination({ dest: 1, sync: false });
  return pino(
    {
      level,
      base: undefined,
      // Keys must never reach the logs: known fields by path, then every line as written (a URL's
      // ?accessKey=, a body echoed in an error message, a stack) through the same masks as error answers.
      redact: { paths: ['req.headers["x-access-key"]', 'req.headers.authorization', 'accessKey', 'key'], censor: '[redacted]' },
      hooks: { streamWrite: redactSecrets },
      ...(opts.pretty ? {} : {}),
    },
    destination as ReturnType<typeof pino.destination>,
  );
}
