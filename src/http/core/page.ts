import { z } from 'zod';

// The Page every service answers with, shared so each list pages the same way.

/**
 * A requested page size, at least 1: one above `max` is answered with `max` rows rather than refused,
 * as Sequence's servers answer an oversized page. The answer's `pageSize` says how many a page holds.
 */
export const pageSizeUpTo = (max: number) =>
  z
    .number()
    .int()
    .min(1)
    .transform((n) => Math.min(n, max));

/**
 * The Page an answer carries: the page to ask for next, so the SDK idiom `page = answer.page` walks
 * forward, and whether that page holds anything.
 */
export const nextPage = (asked: { page: number; pageSize: number }, more: boolean) => ({ page: asked.page + 1, pageSize: asked.pageSize, more });
