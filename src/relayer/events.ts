import { EventEmitter } from 'node:events';

/**
 * In-process notice that a meta-transaction changed, so a waiting GetMetaTxnReceipt answers at once.
 * Other processes' changes are seen by polling the database.
 */
export class RelayEvents {
  private readonly emitter = new EventEmitter();

  constructor() {
    this.emitter.setMaxListeners(0);
  }

  emit(chainId: number, id: string) {
    this.emitter.emit(`${chainId}:${id}`);
  }

  /** Resolves on the next change of this meta-transaction, or after `ms`. */
  next(chainId: number, id: string, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const key = `${chainId}:${id}`;
      const done = () => {
        clearTimeout(timer);
        this.emitter.off(key, done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.emitter.on(key, done);
    });
  }
}
