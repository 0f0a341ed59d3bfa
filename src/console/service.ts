import { type ServiceDef, metadataErrorMap } from '../http/index.ts';
import type { Services } from '../services.ts';
import { consoleAccess } from './access.ts';
import { adminTokenStore } from '../access/admin-tokens.ts';
import type { ConsoleDeps } from './deps.ts';
import { activityMethods, type ActivityServices } from './methods/activity.ts';
import { balanceMethods, type BalanceServices } from './methods/balances.ts';
import { collectionMethods, type CollectionServices } from './methods/collections.ts';
import { collectionEditMethods, type CollectionEditServices } from './methods/collection-edits.ts';
import { ecosystemMethods, type EcosystemServices } from './methods/ecosystems.ts';
import { listenerMethods, type ListenerServices } from './methods/listeners.ts';
import { networkMethods, type NetworkServices } from './methods/network.ts';
import { directoryMethods, type DirectoryServices } from './methods/directory.ts';
import { indexerMethods, type IndexerServices } from './methods/indexer.ts';
import { mediaMethods, type MediaServices } from './methods/media.ts';
import { projectMethods, type ProjectServices } from './methods/projects.ts';
import { sessionMethods, type SessionServices } from './methods/session.ts';
import { sponsorMethods, type SponsorServices } from './methods/sponsors.ts';
import { usageMethods, type UsageServices } from './methods/usage.ts';
import { observeMethods, type ObserveServices } from './methods/observe.ts';
import { webhookMethods, type WebhookServices } from './methods/webhooks.ts';
import { consoleQueries } from './queries.ts';
import { sessionStore } from './sessions.ts';
import { secretDigest } from '../store/digest.ts';

export const CONSOLE_SCHEMA = 'metarelay-console@v0.1.0';

/** What the console's methods read of the services: each group's own, and what its stores are opened on (the database, the config). */
export type ConsoleServices = Pick<Services, 'db' | 'config'> &
  ActivityServices &
  BalanceServices &
  CollectionServices &
  CollectionEditServices &
  EcosystemServices &
  ListenerServices &
  NetworkServices &
  DirectoryServices &
  IndexerServices &
  MediaServices &
  ProjectServices &
  SessionServices &
  SponsorServices &
  UsageServices &
  ObserveServices &
  WebhookServices;

/** What the console's API and its upload route share (the session and admin-token stores). */
export function consoleDeps(s: ConsoleServices): ConsoleDeps<ConsoleServices> {
  return {
    s,
    q: consoleQueries(s.db),
    sessions: sessionStore(s.db, s.config.console.sessionTtlSec, new Set(s.config.admin.tokens.map(secretDigest))),
    tokens: adminTokenStore(s.db, s.config.admin.tokens),
  };
}

/** The console's admin API at /rpc/Console/<Method>: what every button of the page calls. */
export function consoleService(s: ConsoleServices, deps: ConsoleDeps<ConsoleServices> = consoleDeps(s)): ServiceDef {
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
