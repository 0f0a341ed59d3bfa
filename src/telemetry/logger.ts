import { pino, type Logger } from 'pino';
import { redactSecrets } from './redact.ts';

export type { Logger };

export function createLogger(level: string, opts: { pretty?: boolean } = {}): Logger {
  return pino({
    level,
    base: undefined,
    // Keys must never reach the logs: known fields by path, then every line as written (a URL's
    // ?accessKey=, a body echoed in an error message, a stack) through the same masks as error answers.
    redact: { paths: ['req.headers["x-access-key"]', 'req.headers.authorization', 'accessKey', 'key'], censor: '[redacted]' },
    hooks: { streamWrite: redactSecrets },
    ...(opts.pretty ? {} : {}),
  });
}
