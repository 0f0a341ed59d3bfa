import { z } from 'zod';

// The config section of webhooks and event streams: deliveries, retries, listeners, and the fair shares
// of GET /events streams and their resumes.

export const WebhooksConfigSchema = z
  .object({
    /** How long a receiver has to answer one delivery (connect included) before it counts as failed. */
    deadlineMs: z.number().int().positive().max(60_000).default(5_000),
    /** Failed deliveries are retried with exponential backoff and jitter for this long, then dead-lettered. */
    retryHorizonSec: z.number().int().positive().default(86_400),
    /** The first retry's delay; each next one doubles it (up to an hour), ±50 % jitter. */
    retryBaseMs: z.number().int().positive().default(5_000),
    /** An endpoint that has failed every delivery for this long is disabled (the console says why). */
    disableAfterSec: z.number().int().positive().default(259_200),
    /** Deliveries one process sends at once. */
    concurrency: z.number().int().min(1).max(256).default(16),
    /**
     * Deliveries to one endpoint one process sends at once (default: half of concurrency, rounded up), so
     * a receiver that answers only at the deadline cannot hold every lane while others' events wait.
     */
    maxInFlightPerEndpoint: z.number().int().min(1).max(256).optional(),
    /**
     * Deliveries to one project's endpoints one process sends at once (default: three quarters of
     * concurrency, rounded up), so a project with many slow receivers leaves lanes to the others; the
     * claim also takes due deliveries from each project in turn (docs/webhooks.md, Fair shares).
     */
    maxInFlightPerProject: z.number().int().min(1).max(256).optional(),
    /** How often an idle delivery worker looks for due deliveries (other processes' events). */
    pollMs: z.number().int().positive().default(250),
    /** Webhook targets on loopback/private addresses are refused unless allowPrivateNetworks is true or the host is listed here. */
    allowedPrivateHosts: z.array(z.string().min(1)).default([]),
    /** Outbox events are kept this long (SSE resumes and redelivery reach back this far). */
    retentionSec: z.number().int().positive().default(604_800),
    /** `GET /events` streams open at once: per process, per access key, per client address; past one, 429 with Retry-After. */
    maxStreams: z.number().int().min(1).max(100_000).default(2_000),
    maxStreamsPerKey: z.number().int().min(1).max(100_000).default(100),
    maxStreamsPerAddress: z.number().int().min(1).max(100_000).default(50),
    /**
     * Fair shares of the streams and of the outbox reads they cause (issue 54; docs/webhooks.md "Fair
     * shares"): a key ships in browser apps, so every limit inside a key's allowance is split by client
     * network, and resumes are bounded so a reconnecting client cannot make the database read the whole
     * outbox again and again.
     */
    streamShares: z
      .object({
        /** What one client network may hold of maxStreamsPerKey (percent, rounded up): two addresses held all of a dapp's streams. */
        perKeyClientPercent: z.number().int().min(1).max(100).default(10),
        /** The client network of an address: IPv4 /24 and IPv6 /48 (one attacker holds every address in one). */
        ipv4Prefix: z.number().int().min(8).max(32).default(24),
        ipv6Prefix: z.number().int().min(16).max(128).default(48),
        /** A Last-Event-ID more than this many outbox positions (every project's events) behind the head starts at the head, after a stream.gap event. */
        resumeMaxEvents: z.number().int().min(0).default(50_000),
        /** ... or one whose next event is older than this. */
        resumeMaxAgeSec: z.number().int().min(0).default(86_400),
        /** A resume's catch-up reads the outbox in pages of at most this many positions (one page: one bounded statement). */
        resumePageEvents: z.number().int().min(10).max(100_000).default(1_000),
        /** Catch-up pages one client network may read, a token bucket for the fleet together (per second on average, burst at once); past it, its catch-ups wait. */
        resumePagesPerSec: z.number().positive().default(5),
        resumePageBurst: z.number().int().min(1).default(60),
        /** Resumes (streams opened with a Last-Event-ID) one client address may make, a token bucket for the fleet together; past it, 429 with Retry-After. */
        reconnectsPerMin: z.number().positive().default(12),
        reconnectBurst: z.number().int().min(1).default(20),
      })
      .strict()
      .prefault({}),
    /** The sponsorship approval webhook must answer within this, or the rule does not sponsor. */
    approvalDeadlineMs: z.number().int().positive().max(30_000).default(2_000),
    /** Indexer webhook listeners (AddWebhookListener) one project may have on one chain. */
    maxListeners: z.number().int().min(1).max(10_000).default(50),
    /**
     * Listener deliveries one project is sent for one block of one chain, all its listeners together;
     * the logs past it are counted on each listener (droppedLogs) and in /metrics, not delivered.
     */
    maxListenerDeliveriesPerBlock: z.number().int().min(1).max(1_000_000).default(500),
  })
  .prefault({});
