import type { Logger } from '../telemetry/logger.ts';

/** SIGINT/SIGTERM run the cleanup once; a second signal forces the exit. */
export function onShutdown(log: Logger, cleanup: () => Promise<void>) {
  let stopping = false;
  const handler = (signal: string) => {
    if (stopping) {
      process.exit(130);
    }
    stopping = true;
    log.info({ signal }, 'shutting down');
    cleanup()
      .then(() => process.exit(0))
      .catch((err) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      });
  };
  process.on('SIGINT', () => handler('SIGINT'));
  process.on('SIGTERM', () => handler('SIGTERM'));
}
