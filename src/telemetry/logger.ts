import { pino, type Logger } from 'pino';

export type { Logger };

export function createLogger(level: string, opts: { pretty?: boolean } = {}): Logger {
  return pino({
    level,
    base: undefined,
    // Keys must never reach the logs.
    redact: { paths: ['req.headers["x-access-key"]', 'req.headers.authorization', 'accessKey', 'key'], censor: '[redacted]' },
    ...(opts.pretty ? {} : {}),
  });
}
