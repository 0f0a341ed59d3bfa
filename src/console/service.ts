import { type ServiceDef, metadataErrorMap } from '../http/index.ts';
import type { Services } from '../services.ts';
import { consoleAccess } from './access.ts';
import { adminTokenStore } from '../access/admin-tokens.ts';
import type { ConsoleDeps } from './deps.ts';
import { activityMethods } from './methods/activity.ts';
import { balanceMethods } from './methods/balances.ts';
import { collectionMethods } from './methods/collections.ts';
import { collectionEditMethods } from './methods/collection-edits.ts';
import { ecosystemMethods } from './methods/ecosystems.ts';
import { listenerMethods } from './methods/listeners.ts';
import { networkMethods } from './methods/network.ts';
import { directoryMethods } from './methods/directory.ts';
import { indexerMethods } from './methods/indexer.ts';
import { mediaMethods } from './methods/media.ts';
import { projectMethods } from './methods/projects.ts';
import { sessionMethods } from './methods/session.ts';
import { sponsorMethods } from './methods/sponsors.ts';
import { usageMethods } from './methods/usage.ts';
import { observeMethods } from './methods/observe.ts';
import { webhookMethods } from './methods/webhooks.ts';
import { consoleQueries } from './queries.ts';
import { sessionStore } from './sessions.ts';
import { secretDigest } from '../store/digest.ts';

export const CONSOLE_SCHEMA = 'metarelay-console@v0.1.0';

/** What the console's API and its upload route share (the session and admin-token stores). */
export function consoleDeps(s: Services): ConsoleDeps {
  return {
    s,
    q: consoleQueries(s.db),
    sessions: sessionStore(s.db, s.config.console.sessionTtlSec, new Set(s.config.admin.tokens.map(secretDigest))),
    tokens: adminTokenStore(s.db, s.config.admin.tokens),
  };
}

/** The console's admin API at /rpc/Console/<Method>: what every button of the page calls. */
export function consoleService(s: Services, deps: ConsoleDeps = consoleDeps(s)): ServiceDef {
  return {
    name: 'Console',
    schema: CONSOLE_SCHEMA,
    errors: metadataErrorMap,
    // Access is the console's own rule (session cookie or admin token), checked in prepare.
    defaultAuth: () => 'none',
    prepare: consoleAccess(deps.sessions, deps.tokens),
    methods: {
      ...sessionMethods(deps),
      ...projectMethods(deps),
      ...sponsorMethods(deps),
      ...balanceMethods(deps),
      ...activityMethods(deps),
      ...networkMethods(deps),
      ...indexerMethods(deps),
      ...directoryMethods(deps),
      ...mediaMethods(deps),
      ...collectionMethods(deps),
      ...collectionEditMethods(deps),
      ...ecosystemMethods(deps),
      ...listenerMethods(deps),
      ...webhookMethods(deps),
      ...usageMethods(deps),
      ...observeMethods(deps),
    },
  };
}
