/**
 * The cursor of a ranked (text) search: the rank of the previous page's last token. Ranks are
 * (tier, similarity, token id): tiers 0-3 (exact name, name prefix, name substring, description
 * substring) go by token id, tier 4 (typos) by similarity, highest first, then token id. Written
 * as `tier:similarity:tokenId`, the similarity as the database gave it (a float4's shortest exact
 * text, so it compares equal when read back).
 */
export interface RankCursor {
  tier: number;
  sim: number;
  tokenId: string;
}

export const RANK_CURSOR = /^([0-4]):(\d(?:\.\d+)?(?:e-\d+)?):(0|[1-9]\d{0,77})$/;

export function formatRankCursor(c: RankCursor): string {
  return `${c.tier}:${c.sim}:${c.tokenId}`;
}

/** The cursor, or null when the text is not one this service wrote. */
export function parseRankCursor(s: string): RankCursor | null {
  const m = RANK_CURSOR.exec(s);
  if (!m) return null;
  const sim = Number(m[2]);
  if (!(sim >= 0 && sim <= 1)) return null;
  return { tier: Number(m[1]), sim, tokenId: m[3]! };
}
