/** A trait condition: the token has the property `name` with one of `values` (if given) within [min, max] (if given). */
export interface PropertyCondition {
  name: string;
  /** OR within the property; compared case-insensitively, numbers also by value. */
  values: Array<string | number | boolean> | null;
  min: number | null;
  max: number | null;
}

/** The keys a condition's values match (value_key): compared case-insensitively and trimmed. */
export const valueKeysOf = (c: PropertyCondition): string[] => (c.values ?? []).map((v) => String(v).trim().toLowerCase());

/** The condition's values that are numbers (or numeric strings), as decimal text: they also match by value (value_num). */
export const numbersOf = (c: PropertyCondition): string[] =>
  (c.values ?? []).flatMap((v) => (typeof v === 'number' ? [String(v)] : typeof v === 'string' && /^\s*-?\d+(\.\d+)?\s*$/.test(v) ? [v.trim()] : []));

/** `text` matches name and description (ranked, typo-tolerant); properties are ANDed. */
export interface TokenFilter {
  text: string | null;
  properties: PropertyCondition[];
}

/** The bounds of a search request, enforced at the API edge and documented in the README. */
export const SEARCH_LIMITS = {
  maxPageSize: 1000,
  defaultPageSize: 100,
  /** Deep pages cost an OFFSET scan: page × pageSize may not pass this. */
  maxOffset: 100_000,
  maxTextLength: 200,
  maxProperties: 20,
  maxValuesPerProperty: 100,
  maxValueLength: 200,
  maxNameLength: 100,
  maxExcludes: 200,
  /** GetTokenMetadataPropertyFilters: most common values given per property, and properties per contract. */
  filterValues: 1000,
  filterProperties: 500,
} as const;
