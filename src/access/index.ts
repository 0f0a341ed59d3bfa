// The access domain's front door: who may call (projects, their keys, the authenticator), how often
// (the rate limiter), what they asked (the request journal) and the answers kept for repeated reads.
import type { Common } from '../common.ts';
import { accessKeyRepo, type AccessKeyRepo } from '../store/access-keys.ts';
import { ecosystemRepo, type EcosystemRepo } from '../store/ecosystems.ts';
import { projectRequestRepo } from '../store/project-requests.ts';
import { projectRepo, type ProjectRepo } from '../store/projects.ts';
import { Authenticator } from './authenticator.ts';
import { RateLimiter } from './rate-limiter.ts';
import { RequestJournal } from './request-journal.ts';
import { tokenResponseCache, type ResponseCache } from './response-cache.ts';

export interface Access {
  projects: ProjectRepo;
  /** Groups of projects whose ecosystem sponsorship rules cover them all. */
  ecosystems: EcosystemRepo;
  accessKeys: AccessKeyRepo;
  auth: Authenticator;
  /** Each project's recent requests, for the console's request log (written in batches, bounded per project). */
  requestJournal: RequestJournal;
  rateLimiter: RateLimiter;
  /** Whole answers to repeated token reads, REST and RPC alike; looked up only after the access check. */
  responses: ResponseCache;
}

export function createAccess({ config, db, log, metrics, shutdown }: Common): Access {
  const accessKeys = accessKeyRepo(db);
  const auth = new Authenticator(accessKeys, log, { cacheMs: config.auth.keyCacheMs });
  const requestJournal = new RequestJournal(projectRequestRepo(db), log, config.console.requestLog, metrics);
  // Last added, first run: the keys' last-used times, then the journal's batch.
  shutdown.add(() => requestJournal.flush());
  shutdown.add(() => auth.flush());
  return {
    projects: projectRepo(db),
    ecosystems: ecosystemRepo(db),
    accessKeys,
    auth,
    requestJournal,
    rateLimiter: new RateLimiter(db, config.auth.rateLimit),
    responses: tokenResponseCache(config),
  };
}
