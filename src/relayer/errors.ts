import { MetarelayError } from '../util/error.ts';

/** Why the relayer refused a request, in terms the HTTP layer maps to the relayer's own error table. */
export type RelayErrorKind = 'invalidArgument' | 'simulationFailed' | 'insufficientFee' | 'conflict' | 'notFound' | 'unavailable' | 'barred' | 'rateLimited';

export class RelayError extends MetarelayError {
  override name = 'RelayError';
  constructor(
    override readonly kind: RelayErrorKind,
    message: string,
  ) {
    super(message, { kind, retryable: kind === 'unavailable' || kind === 'rateLimited' });
  }
}

/**
 * A simulation no node would run on the newest block this relayer has seen (each answered from an older
 * one, or refused it): nothing is accepted or signed on it. Unavailable for a caller (send again); the
 * dispatcher leaves the meta-transaction queued for its next pass.
 */
export class StaleState extends RelayError {
  constructor(
    readonly chainId: number,
    readonly seen: bigint,
    readonly answered: bigint | undefined,
    cause?: unknown,
  ) {
    const got = answered !== undefined && answered >= 0n ? `answered from block ${answered}` : `refused it${cause instanceof Error ? ` (${cause.message.split('\n')[0].slice(0, 160)})` : ''}`;
    super('unavailable', `the chain's node is behind: a simulation at block ${seen}, which this relayer has seen, was ${got}; try again`);
    this.name = 'StaleState';
  }
}
