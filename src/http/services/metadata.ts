import type { Services } from '../../services.ts';
import { metadataErrorMap } from '../errors.ts';
import { method, type ServiceDef } from '../webrpc.ts';
import { NoArgs, runtimeStatus, versionInfo } from './common.ts';

export const METADATA_SCHEMA = 'sequence-metadata@v0.4.0';

export function metadataService(s: Services): ServiceDef {
  return {
    name: 'Metadata',
    schema: METADATA_SCHEMA,
    errors: metadataErrorMap,
    defaultAuth: (name) => (s.config.auth.publicMethods.includes(name) ? 'optional' : s.config.auth.rpc),
    methods: {
      Ping: method({ input: NoArgs, handler: async () => ({ status: true }) }),
      Version: method({
        input: NoArgs,
        handler: async () => ({ version: versionInfo('v0.4.0', '673a5fa528008c7f9558810fbb24aad978ed7a84') }),
      }),
      RuntimeStatus: method({ input: NoArgs, handler: async () => ({ status: await runtimeStatus(s) }) }),
    },
  };
}
