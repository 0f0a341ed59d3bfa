// The events domain's front door: the outbox, webhook endpoints and listeners, their delivery worker
// and the event streams; and the hooks the other domains record their events with, each on the
// transaction that changes what the event tells of (given to those domains by the wiring).
import type { Common } from '../common.ts';
import type { ChainClient } from '../chain/client.ts';
import { createPoster, type Poster } from '../untrusted/post.ts';
import { approvalClient } from './approval-client.ts';
import { balanceEvents } from './balance-events.ts';
import { contractInfoEvents } from './contract-events.ts';
import { DeliveryWorker } from './delivery.ts';
import { listenerHooks } from './listener-events.ts';
import { listenerStore, type ListenerStore } from './listener-store.ts';
import { metaTxnStatusEvents } from './metatxn-events.ts';
import { EventBell, outbox, type Outbox } from './outbox.ts';
import { senderBalanceEvents } from './sender-events.ts';
import { EventStreamHub } from './stream-hub.ts';
import { taskFinishedEvents } from './task-events.ts';
import { tokenDocumentEvents } from './token-events.ts';
import { webhookStore, type WebhookStore } from './webhook-store.ts';

/** Push: the events outbox, webhook endpoints and their delivery worker (started with the dispatchers or the background workers). */
export interface Events {
  outbox: Outbox;
  webhooks: WebhookStore;
  listeners: ListenerStore;
  bell: EventBell;
  delivery: DeliveryWorker;
  post: Poster;
  streams: EventStreamHub;
}

export function createEvents({ config, db, log, metrics, shutdown }: Common): Events {
  const w = config.webhooks;
  const bell = new EventBell();
  // One SSRF-guarded client for webhook deliveries and sponsorship approvals.
  const post = createPoster({ allowPrivateNetworks: config.allowPrivateNetworks, allowedPrivateHosts: w.allowedPrivateHosts, maxSockets: Math.max(64, w.concurrency) });
  const webhooks = webhookStore(db);
  const box = outbox(db);
  const delivery = new DeliveryWorker({ store: webhooks, outbox: box, post, bell, log, settings: w });
  const lanes = DeliveryWorker.caps(w);
  for (const [limit, v] of Object.entries({
    concurrency: w.concurrency,
    maxInFlightPerEndpoint: lanes.endpoint,
    maxInFlightPerProject: lanes.project,
    maxListenerDeliveriesPerBlock: w.maxListenerDeliveriesPerBlock,
    maxListeners: w.maxListeners,
  }))
    metrics.webhookShares.set({ limit }, v);
  const streams = new EventStreamHub({ outbox: box, bell, log });
  // Last added, first run: deliveries in flight finish and are recorded, then the streams end, then the client goes.
  shutdown.add(() => post.close());
  shutdown.add(() => streams.close());
  shutdown.add(() => delivery.stop());
  return { outbox: box, webhooks, listeners: listenerStore(db, webhooks), bell, delivery, post, streams };
}

/** The metadata domain's events: token.metadata_updated, contract.info_updated (with the info `view` builds), refresh.task_finished. */
export function metadataEvents({ bell }: Events) {
  return {
    onDocumentChanged: tokenDocumentEvents(bell),
    onContractChanged: (view: Parameters<typeof contractInfoEvents>[1]) => contractInfoEvents(bell, view),
    onTaskFinished: taskFinishedEvents(bell),
  };
}

/** The relayer's: metatxn.status for every status it writes, sender.low_balance/recovered, and its approval client. */
export function relayerEvents({ bell, post }: Events, { config, log }: Common) {
  return {
    onStatus: (metaTxns: Parameters<typeof metaTxnStatusEvents>[0]) => metaTxnStatusEvents(metaTxns, bell),
    onSenderBalance: senderBalanceEvents(bell),
    approveSponsorship: approvalClient(post, config.webhooks.approvalDeadlineMs, log),
  };
}

/** The indexer's: balance.updated (for the chains whose scope allows it) and what webhook listeners asked to hear. */
export function indexerEvents({ bell, listeners }: Events, { config, metrics }: Common, chains: ReadonlyMap<number, ChainClient>) {
  return {
    onBalances: balanceEvents(bell),
    // Every indexed chain tells its webhook listeners (a chain nobody listens on: one small read a step).
    listening: listenerHooks(bell, listeners, {
      maxPerBlock: config.webhooks.maxListenerDeliveriesPerBlock,
      dropped: (chainId, n) => metrics.listenerLogsDropped.inc({ chain: chains.get(chainId)?.name ?? String(chainId) }, n),
    }),
  };
}
