/** Why the relayer refused a request, in terms the HTTP layer maps to the relayer's own error table. */
export type RelayErrorKind = 'invalidArgument' | 'simulationFailed' | 'insufficientFee' | 'conflict' | 'notFound' | 'unavailable' | 'barred' | 'rateLimited';

export class RelayError extends Error {
  constructor(
    readonly kind: RelayErrorKind,
    message: string,
  ) {
    super(message);
    this.name = 'RelayError';
  }
}
