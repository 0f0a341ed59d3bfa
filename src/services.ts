// The wiring (alto's setupServer, ponder's Common): each domain built by its own create<Domain>(common, …)
// from its front door, in the order their dependencies run, and the process's loops started, drained and
// stopped here. What each domain decides (which loops it runs, its limits from the config) stays in it.
import { createAccess, type Access } from './access/index.ts';
import { createChains, type Chains } from './chain/clients.ts';
import { createCollections, type Collections } from './collections/index.ts';
import { createCommon, warnConnectionBudget, type Common, type CommonOptions } from './common.ts';
import type { AppConfig } from './config/schema.ts';
import { createEvents, indexerEvents, metadataEvents, relayerEvents, type Events } from './events/index.ts';
import { createIndexer, type Indexer } from './indexer/index.ts';
import { createMedia, type Media } from './media/index.ts';
import { createMetadata, createRemoteFetcher, type Metadata } from './metadata/index.ts';
import { createPrices, type UsdPrices } from './prices/index.ts';
import { createRelayer, type Relayer } from './relayer/index.ts';
import { Leadership, chainRoles, type Role } from './store/leadership.ts';

/** Everything the HTTP layer and workers need, built once from the config: what each domain's create<Domain> gave, and the loops. */
export type Services = Common & Chains & Access & Pick<Collections, 'collections' | 'fetcher'> & Pick<Media, 'media'> & Metadata & Relayer & Indexer & Lifecycle;

interface Lifecycle {
  /** USD prices per chain configured with `prices` (the indexer's priceUSD, GetTokenPrice(s), ListTokenPrices), by chain id. */
  prices: ReadonlyMap<number, UsdPrices>;
  /** Push: the events outbox, webhook endpoints and their delivery worker (started with the dispatchers or the background workers). */
  events: Events;
  /** Which process of the fleet follows each chain, sweeps media and checks the alerts (store/leadership.ts); run by startBackground. */
  leadership: Leadership;
  /** Starts the relayer dispatchers (what `metarelay relayer` runs, and `serve`/`dev` by default). */
  startDispatchers(): void;
  /** Starts the refresh worker and the chain watchers (what `worker` runs, and `serve`/`dev` by default). */
  startBackground(): void;
  /**
   * Counts this process among the fleet's API processes (what `serve` and `dev` call once they listen):
   * every in-memory rate bucket then holds its share of the configured rate (util/fleet-share.ts).
   */
  startApi(): void;
  startedAt: Date;
  /** Set by drain(): HTTP refuses new work (503), readiness says no. */
  readonly draining: boolean;
  /** Stops taking work: dispatchers finish their pass and hand their senders back, the worker and watchers stop. */
  drain(): Promise<void>;
  close(): Promise<void>;
}

export interface CreateServicesOptions extends CommonOptions {
  pollingIntervalMs?: number;
}

export async function createServices(config: AppConfig, opts: CreateServicesOptions = {}): Promise<Services> {
  const common = await createCommon(config, opts);
  const { networks, chains } = createChains(common, opts);
  const access = createAccess(common);
  const remoteFetcher = createRemoteFetcher(common);
  const { media, mediaRoles, mediaHooks } = createMedia(common, { fetcher: remoteFetcher });
  // Collection edits queue refreshes of the linked contracts with the metadata domain, built next.
  const refresh = () => ({ refresh: metadata.refresh, nudge: () => metadata.worker.nudge() });
  const { collections, fetcher, collectionsIdle } = createCollections(common, { media, chains, fetcher: remoteFetcher, refresh });
  const events = createEvents(common);
  const metadata = createMetadata(common, { chains, fetcher, media: mediaHooks, events: metadataEvents(events) });
  const { relayerRoles, dispatchRoles, relayerConnections, ...relayer } = await createRelayer(common, { chains, events: relayerEvents(events, common) });
  await warnConnectionBudget(common, relayerConnections);
  const { indexerFollowers, ...indexer } = createIndexer(common, { chains, metadata, events: indexerEvents(events, common, chains) });
  const prices = createPrices(common, chains);
  const followers = [...metadata.watchers.map((w): [number, typeof w] => [w.chainId, w]), ...indexerFollowers];
  const leadership = fleetLeadership(common);
  // What a process leads depends on what it runs: the followers, media and alerts with the background
  // workers; the dispatchers (one process per chain: relayer.dispatchers `leader`) with the dispatchers;
  // the webhook poll with either. Without lock sessions (PGlite) this process leads each as it adds it.
  const backgroundRoles: Array<[string, Role]> = [
    ...chainRoles(
      config.chains.map((c) => c.chainId),
      followers,
    ),
    ...mediaRoles,
    ...relayerRoles,
  ];
  const leadsDispatch = common.db.lockSession !== undefined && config.relayer.dispatchers === 'leader';
  const lead = (roles: Array<[string, Role]>) => {
    for (const [name, role] of roles) if (!leadership.has(name)) leadership.add(name, role);
    leadership.start();
  };
  const startDelivery = () => {
    if (common.db.lockSession) events.delivery.leadOnly();
    events.delivery.start();
    lead([['webhook-poll', events.delivery.pollRole]]);
  };

  const { worker } = metadata;
  const { dispatchers, receiptWaiters } = relayer;
  const { indexerBackfills } = indexer;
  let background = false;
  let dispatching = false;
  let serving = false;
  let closed = false;
  let draining = false;
  return {
    ...common,
    networks,
    chains,
    ...access,
    fetcher,
    media,
    collections,
    ...metadata,
    ...relayer,
    ...indexer,
    prices,
    events,
    leadership,
    startDispatchers() {
      dispatching = true;
      startDelivery();
      if (leadsDispatch) lead(dispatchRoles);
      else for (const d of dispatchers) d.start();
    },
    startBackground() {
      background = true;
      startDelivery();
      worker.start();
      lead(backgroundRoles);
      indexerBackfills?.start();
    },
    startApi() {
      if (serving) return;
      serving = true;
      leadership.join('api', (n) => {
        common.fleet.set(n);
        common.metrics.fleetApiProcesses.set(common.fleet.size);
      });
      leadership.start();
    },
    startedAt: new Date(common.clock()),
    get draining() {
      return draining;
    },
    async drain() {
      draining = true;
      // Open receipt long polls answer now with the current status; the client polls again elsewhere.
      receiptWaiters.release();
      // Dispatchers first: their senders go back now, so another process signs with them on its next tick.
      if (dispatching) await Promise.all(dispatchers.map((d) => d.stop()));
      dispatching = false;
      // The roles led here (a dispatcher's among them) stop and their locks go: another process leads them at its next check.
      await Promise.all([background && worker.stop(), leadership.stop()]);
      background = false;
      // Deliveries in flight finish and are recorded; what is left is claimed by another process.
      await events.delivery.stop();
    },
    async close() {
      if (closed) return;
      closed = true;
      // Refreshes a collection edit noted are queued before the database goes.
      await collectionsIdle();
      await Promise.all([background && worker.stop(), leadership.stop(), background && indexerBackfills?.stop()]);
      if (dispatching) await Promise.all(dispatchers.map((d) => d.stop()));
      // Then what the domains opened, last first: the dispatchers' pool, deliveries and streams, media, the
      // fetcher, the keys' and journal's last writes, the head readers, the database.
      await common.shutdown.run();
    },
  };
}

/**
 * The fleet's leadership over the roles the process adds as it starts its loops. On PostgreSQL one process
 * runs each role (the lock session); on PGlite (one process) this one runs them all.
 */
function fleetLeadership({ config, db, log, metrics }: Common): Leadership {
  const pg = config.postgres;
  return new Leadership(db.lockSession ? () => db.lockSession!(pg.leaderSessionTimeoutMs) : undefined, {
    checkMs: pg.leaderCheckMs,
    log,
    onChange: (role, leading) => metrics.leader.set({ role }, leading ? 1 : 0),
  });
}
