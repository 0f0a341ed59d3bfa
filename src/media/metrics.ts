// The media pipeline's Prometheus metrics, registered on the service's registry by the wiring.
import { Counter, Gauge, type Registry } from 'prom-client';
import { slotGauge } from '../telemetry/slot-gauge.ts';

export function mediaMetrics(registry: Registry) {
  return {
    fetches: new Counter({
      name: 'metarelay_media_fetches_total',
      help: 'media fetches by outcome: ok, or the failure reason (TOO_LARGE, BLOCKED_ADDRESS, UNSUPPORTED_TYPE…)',
      labelNames: ['outcome'] as const,
      registers: [registry],
    }),
    renditions: new Counter({
      name: 'metarelay_media_renditions_total',
      help: 'renditions generated (rendered and stored), by format',
      labelNames: ['format'] as const,
      registers: [registry],
    }),
    bytesStored: new Counter({
      name: 'metarelay_media_stored_bytes_total',
      help: 'bytes written to the blob store, originals and renditions',
      labelNames: ['kind'] as const,
      registers: [registry],
    }),
    queueDepth: new Gauge({ name: 'metarelay_media_queue_depth', help: 'media fetches queued or running in the background in this process', registers: [registry] }),
    fetchSlots: slotGauge(registry, 'metarelay_media_fetch_slots', 'media fetch slots (media.concurrency): running, waiting, hostsAtLimit (hosts holding their whole per-host share)'),
    storeFailures: new Counter({
      name: 'metarelay_media_store_failures_total',
      help: 'media originals the blob store refused to write (disk full, not writable, S3 errors): recorded STORE_FAILED and fetched again after media.storeRetrySec',
      registers: [registry],
    }),
    dropped: new Counter({ name: 'metarelay_media_queue_dropped_total', help: 'background media fetches dropped because the queue was full (done lazily later)', registers: [registry] }),
    served: new Counter({
      name: 'metarelay_media_served_total',
      help: 'content-addressed media answers by where the bytes came from: memory (hot renditions), store, rendered (first request), original, not_modified (304)',
      labelNames: ['source'] as const,
      registers: [registry],
    }),
  };
}
export type MediaMetrics = ReturnType<typeof mediaMetrics>;
