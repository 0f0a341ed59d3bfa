import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions, LevelWithSilentOrString } from 'pino';

type Log = (...a: unknown[]) => void;

/**
 * fastify gives every request a child logger (bound to its request id), made before any hook runs.
 * Most requests never log through it (the request line is written by the root logger, with the id),
 * and a pino child per request was measurable on the cached read path; this one is made on first use.
 */
class LazyRequestLogger {
  private made: FastifyBaseLogger | undefined;

  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly bindings: Bindings,
    private readonly opts: ChildLoggerOptions,
  ) {}

  private get log(): FastifyBaseLogger {
    return (this.made ??= this.parent.child(this.bindings, this.opts));
  }

  get level(): LevelWithSilentOrString {
    return this.made?.level ?? this.opts.level ?? this.parent.level;
  }

  set level(l: LevelWithSilentOrString) {
    this.log.level = l;
  }

  // Prototype methods, not arrow fields: one object per request, no closures.
  fatal(...a: unknown[]): void {
    const l = this.log;
    (l.fatal as Log).apply(l, a);
  }
  error(...a: unknown[]): void {
    const l = this.log;
    (l.error as Log).apply(l, a);
  }
  warn(...a: unknown[]): void {
    const l = this.log;
    (l.warn as Log).apply(l, a);
  }
  info(...a: unknown[]): void {
    const l = this.log;
    (l.info as Log).apply(l, a);
  }
  debug(...a: unknown[]): void {
    const l = this.log;
    (l.debug as Log).apply(l, a);
  }
  trace(...a: unknown[]): void {
    const l = this.log;
    (l.trace as Log).apply(l, a);
  }
  silent(...a: unknown[]): void {
    const l = this.log;
    (l.silent as Log).apply(l, a);
  }

  child(bindings: Bindings, opts?: ChildLoggerOptions): FastifyBaseLogger {
    return this.log.child(bindings, opts);
  }
}

/** fastify's `childLoggerFactory`: a request logger that costs one small object until it is used. */
export function lazyChildLogger(logger: FastifyBaseLogger, bindings: Bindings, opts: ChildLoggerOptions): FastifyBaseLogger {
  return new LazyRequestLogger(logger, bindings, opts) as unknown as FastifyBaseLogger;
}
