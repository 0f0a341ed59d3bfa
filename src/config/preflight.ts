import type { ChainClient } from '../chain/client.ts';
import type { Logger } from '../telemetry/logger.ts';
import { causeOf } from '../util/cause.ts';
import { ConfigError } from './errors.ts';

/**
 * Boot-time checks: a configured chain whose node answers with another chain id is a config
 * mistake worth refusing; an unreachable node is only logged (it may come back).
 */
export async function preflight(s: { chains: ReadonlyMap<number, ChainClient>; log: Logger }): Promise<void> {
  const problems: string[] = [];
  await Promise.all(
    [...s.chains.values()].map(async (c) => {
      try {
        const id = await Promise.race([c.public.getChainId(), new Promise<never>((_, r) => setTimeout(() => r(new Error('no answer within 5 s')), 5_000).unref())]);
        if (id !== c.chainId) problems.push(`chains: "${c.name}" is configured as chainId ${c.chainId} but its RPC answers ${id}`);
      } catch (err) {
        s.log.warn({ chain: c.name, err: causeOf(err) }, 'chain RPC unreachable at boot');
      }
    }),
  );
  if (problems.length) throw new ConfigError('preflight failed', problems);
}
