import type { z } from 'zod';
import { IndexerErrors } from '../errors.ts';
import type { MethodDef } from '../webrpc.ts';
import { refusedMethodDefs } from './common.ts';

// Indexer methods of the schema not served yet, refused with what to use meanwhile (rather than an
// unknown-route answer a client cannot tell from a wrong URL). Arguments are not read.
const WEBHOOKS =
  'is not offered yet: the indexer\'s balance changes reach a project as "balance.updated" events (chains indexed with scope: watchlist), delivered to webhooks registered with Console/CreateWebhook (signed, at least once) — docs/webhooks.md';

const REFUSED: Record<string, string> = Object.fromEntries([
  ...[
    'AddWebhookListener',
    'UpdateWebhookListener',
    'RemoveWebhookListener',
    'ToggleWebhookListener',
    'PauseAllWebhookListeners',
    'ResumeAllWebhookListeners',
    'GetWebhookListener',
    'GetAllWebhookListeners',
    'RemoveAllWebhookListeners',
  ].map((m) => [m, `${m} ${WEBHOOKS}`]),
]);

export function refusedIndexerMethods(): Record<string, MethodDef<z.ZodType>> {
  return refusedMethodDefs(REFUSED, IndexerErrors.MethodNotFound);
}
