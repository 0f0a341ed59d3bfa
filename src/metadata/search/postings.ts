import { compareDecimal, parseDecimal } from './decimal.ts';
import { numbersOf, valueKeysOf, type PropertyCondition } from './filter.ts';

/** One token as the posting lists need it: its pairs and its lower-cased name and description. */
export interface PostingToken {
  id: string;
  name: string | null;
  description: string | null;
  /** (name_key, value_key, value_num as text or null), as token_properties holds them. */
  pairs: Array<[string, string, string | null]>;
}

/** Token ids are canonical decimals: by length, then text, is numeric order (TOKEN_ORDER in SQL). */
export const byTokenOrder = (a: string, b: string) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);

interface Held {
  name: string | null;
  description: string | null;
  /** Pair ids: a plain array of small integers, which the garbage collector does not trace (a typed array per token would be 100 000 more objects). */
  pairs: number[];
}

interface PairInfo {
  nameKey: string;
  valueKey: string;
  num: ReturnType<typeof parseDecimal>;
}

/**
 * One contract's search index held in memory at a version of the database's (migration 0029): the
 * tokens' (property, value) pairs as posting lists over the tokens in token order, and their names
 * and descriptions for the text tiers. The database stays the truth: a holder catches up by the
 * tokens changed since its version, and every row it answers is read from the database.
 */
export class ContractPostings {
  private readonly tokens = new Map<string, Held>();
  private readonly pairIds = new Map<string, number>();
  private readonly pairs: PairInfo[] = [];
  /** Identical descriptions share one string: generated collections repeat them (names are mostly unique). */
  private readonly strings = new Map<string, string>();
  private built: PostingsView | null = null;
  private order: string[] = [];
  private orderDirty = false;

  constructor(public version: number) {}

  get size(): number {
    return this.tokens.size;
  }

  /** Replaces the listed tokens with what the database holds now; those not in `now` are gone. */
  apply(changed: Iterable<string>, now: PostingToken[]): void {
    const present = new Map(now.map((t) => [t.id, t]));
    for (const id of changed) {
      const t = present.get(id);
      if (!t) {
        if (this.tokens.delete(id)) this.orderDirty = true;
        continue;
      }
      if (!this.tokens.has(id)) this.orderDirty = true;
      this.tokens.set(id, { name: t.name, description: this.intern(t.description), pairs: t.pairs.map((p) => this.pairId(p)) });
    }
    this.built = null;
  }

  /** Loads a whole contract (every token listed). */
  load(all: PostingToken[]): void {
    this.apply(
      all.map((t) => t.id),
      all,
    );
  }

  /**
   * Bytes held, roughly, with the view and its text index built: what the cache's memory budget
   * counts. Per token: its entry and id, its name twice (the string and the text index), 8 bytes per
   * pair in its list and 4 in a posting list, and the view's slots; shared descriptions once.
   */
  bytes(): number {
    let n = 200 + this.pairs.length * 120;
    for (const s of this.strings.keys()) n += 80 + s.length * 4;
    for (const [id, t] of this.tokens) n += 200 + id.length * 2 + (t.name?.length ?? 0) * 4 + t.pairs.length * 12;
    return n;
  }

  private intern(s: string | null): string | null {
    if (s === null) return null;
    const held = this.strings.get(s);
    if (held !== undefined) return held;
    this.strings.set(s, s);
    return s;
  }

  private pairId([nameKey, valueKey, num]: [string, string, string | null]): number {
    const key = `${nameKey}\u0000${valueKey}\u0000${num ?? ''}`;
    let id = this.pairIds.get(key);
    if (id === undefined) {
      id = this.pairs.length;
      this.pairs.push({ nameKey, valueKey, num: num === null ? null : parseDecimal(num) });
      this.pairIds.set(key, id);
    }
    return id;
  }

  /**
   * What searches read: made from the tokens once per change and never changed after (a search
   * that awaits keeps its view while a catch-up makes the next one).
   */
  view(): PostingsView {
    if (this.built) return this.built;
    if (this.orderDirty) {
      this.order = [...this.tokens.keys()].sort(byTokenOrder);
      this.orderDirty = false;
    }
    const ids = this.order;
    const lists: number[][] = this.pairs.map(() => []);
    const names: Array<string | null> = new Array(ids.length);
    const descriptions: Array<string | null> = new Array(ids.length);
    for (let ord = 0; ord < ids.length; ord++) {
      const t = this.tokens.get(ids[ord]!)!;
      names[ord] = t.name;
      descriptions[ord] = t.description;
      for (const p of t.pairs) lists[p]!.push(ord);
    }
    const byName = new Map<string, number[]>();
    for (const [id, p] of this.pairs.entries()) {
      if (lists[id]!.length === 0) continue;
      const l = byName.get(p.nameKey);
      if (l) l.push(id);
      else byName.set(p.nameKey, [id]);
    }
    this.built = new PostingsView(
      ids,
      names,
      descriptions,
      this.pairs.slice(),
      lists.map((l) => Int32Array.from(l)),
      byName,
    );
    return this.built;
  }
}

/** How the tokens' names and descriptions match a text (PostingsView.textMatches). */
export interface TextMatches {
  /** Per ordinal: 1 the name is the text, 2 starts with it, 3 has it elsewhere, 0 does not have it (or no name). */
  name: Uint8Array;
  /** Per ordinal, its description's place among the distinct descriptions (-1: none). */
  descriptionOf: Int32Array;
  /** Per distinct description, 1 when it has the text. */
  descriptionHit: Uint8Array;
}

/** One version of a contract's posting lists, as searches read it. */
export class PostingsView {
  /** Ordinal of a token id; made when first needed (word postings). */
  private ordinals: Map<string, number> | null = null;
  /** Word postings read so far (typo search), by word. */
  private readonly words = new Map<string, Int32Array>();
  /** The contract's words nearest to a word of a text, as read for this version (typo search). */
  readonly nearWords = new Map<string, { word: string; words: string[]; tokens: number }>();
  private texts: ReturnType<PostingsView['text']> | null = null;

  constructor(
    /** Token ids in token order: a token's ordinal is its place here. */
    readonly ids: readonly string[],
    readonly names: ReadonlyArray<string | null>,
    readonly descriptions: ReadonlyArray<string | null>,
    private readonly pairs: readonly PairInfo[],
    /** Per pair id, the ordinals of the tokens having it, ascending. */
    private readonly postings: readonly Int32Array[],
    /** Per name_key, its pair ids. */
    private readonly byName: ReadonlyMap<string, number[]>,
  ) {}

  /**
   * The tokens having every property (AND across properties, OR within one's values, min/max as
   * numbers), as a mark per ordinal (1 = matches); null when there are no properties (all match).
   */
  matching(props: PropertyCondition[]): Uint8Array | null {
    if (props.length === 0) return null;
    // hits[ord] counts the properties the token has met so far, each at most once.
    const hits = new Uint8Array(this.ids.length);
    for (const [i, c] of props.entries()) {
      const keys = c.values ? new Set(valueKeysOf(c)) : null;
      const nums = numbersOf(c).flatMap((n) => parseDecimal(n) ?? []);
      const min = c.min === null ? null : parseDecimal(String(c.min));
      const max = c.max === null ? null : parseDecimal(String(c.max));
      for (const id of this.byName.get(c.name.toLowerCase()) ?? []) {
        const p = this.pairs[id]!;
        if (keys && !keys.has(p.valueKey) && !(p.num && nums.some((n) => compareDecimal(p.num!, n) === 0))) continue;
        if (min && !(p.num && compareDecimal(p.num, min) >= 0)) continue;
        if (max && !(p.num && compareDecimal(p.num, max) <= 0)) continue;
        for (const ord of this.postings[id]!) if (hits[ord] === i) hits[ord] = i + 1;
      }
    }
    const all = props.length;
    for (let ord = 0; ord < hits.length; ord++) hits[ord] = hits[ord] === all ? 1 : 0;
    return hits;
  }

  /**
   * How each token's name matches the (lower-case) text, per ordinal: 1 exact, 2 prefix, 3
   * substring, 0 not at all; and whether its description has it, as LIKE '%text%' on the lower-cased
   * values would say.
   */
  textMatches(q: string): TextMatches {
    const t = this.text();
    const n = this.ids.length;
    const name = new Uint8Array(n);
    const descHit = new Uint8Array(t.descriptions.length);
    if (q === '') {
      for (let ord = 0; ord < n; ord++) if (this.names[ord] != null) name[ord] = this.names[ord] === '' ? 1 : 2;
      descHit.fill(1);
    } else if (!q.includes('\u0000')) {
      // Stored text never holds NUL (PostgreSQL text cannot), so a match never spans two names.
      for (let at = t.names.indexOf(q), ord = 0; at >= 0; ) {
        while (t.nameStarts[ord + 1]! <= at) ord++;
        const off = at - t.nameStarts[ord]!;
        const len = t.nameStarts[ord + 1]! - 1 - t.nameStarts[ord]!;
        name[ord] = off > 0 ? 3 : q.length === len ? 1 : 2;
        // The first match in a name decides its tier: go on from the next name.
        at = t.names.indexOf(q, t.nameStarts[ord + 1]!);
      }
      for (let at = t.descriptionText.indexOf(q), d = 0; at >= 0; ) {
        while (t.descriptionStarts[d + 1]! <= at) d++;
        descHit[d] = 1;
        at = t.descriptionText.indexOf(q, t.descriptionStarts[d + 1]!);
      }
    }
    for (const ord of t.unnamed) name[ord] = 0;
    return { name, descriptionOf: t.descriptionOf, descriptionHit: descHit };
  }

  /** The names, and the distinct descriptions, each as one NUL-separated text searched with indexOf. */
  private text(): { names: string; nameStarts: Int32Array; unnamed: number[]; descriptions: string[]; descriptionText: string; descriptionStarts: Int32Array; descriptionOf: Int32Array } {
    if (this.texts) return this.texts;
    const nameStarts = new Int32Array(this.ids.length + 1);
    const unnamed: number[] = [];
    let at = 0;
    for (let ord = 0; ord < this.ids.length; ord++) {
      if (this.names[ord] == null) unnamed.push(ord);
      nameStarts[ord] = at;
      at += (this.names[ord] ?? '').length + 1;
    }
    nameStarts[this.ids.length] = at;
    const index = new Map<string, number>();
    const descriptions: string[] = [];
    const descriptionOf = new Int32Array(this.ids.length);
    for (let ord = 0; ord < this.ids.length; ord++) {
      const d = this.descriptions[ord] ?? null;
      if (d === null) {
        descriptionOf[ord] = -1;
        continue;
      }
      let i = index.get(d);
      if (i === undefined) index.set(d, (i = descriptions.push(d) - 1));
      descriptionOf[ord] = i;
    }
    const descriptionStarts = new Int32Array(descriptions.length + 1);
    at = 0;
    for (const [i, d] of descriptions.entries()) {
      descriptionStarts[i] = at;
      at += d.length + 1;
    }
    descriptionStarts[descriptions.length] = at;
    this.texts = {
      names: this.names.map((x) => x ?? '').join('\u0000') + '\u0000',
      nameStarts,
      unnamed,
      descriptions,
      descriptionText: descriptions.join('\u0000') + '\u0000',
      descriptionStarts,
      descriptionOf,
    };
    return this.texts;
  }

  /** The ordinal of a token id, or -1. */
  ordinal(id: string): number {
    this.ordinals ??= new Map(this.ids.map((x, i) => [x, i]));
    return this.ordinals.get(id) ?? -1;
  }

  /**
   * The first ordinal after token `id` in token order (the place a cursor resumes from), whether or
   * not the token is still indexed.
   */
  after(id: string): number {
    const ids = this.ids;
    let lo = 0;
    let hi = ids.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (byTokenOrder(ids[mid]!, id) <= 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** The word postings held for `words`, and which words are not held yet. */
  wordPostings(words: string[]): { held: Map<string, Int32Array>; missing: string[] } {
    const held = new Map<string, Int32Array>();
    const missing: string[] = [];
    for (const w of words) {
      const l = this.words.get(w);
      if (l) held.set(w, l);
      else missing.push(w);
    }
    return { held, missing };
  }

  /**
   * Keeps the postings of words read from the database (token_words) after this view's version
   * was read: a token they list that this view lacks is left out, and the next version's view
   * reads them again.
   */
  holdWords(rows: Array<{ word: string; tokenId: string }>, words: string[]): void {
    const lists = new Map<string, number[]>(words.map((w) => [w, []]));
    for (const r of rows) {
      const ord = this.ordinal(r.tokenId);
      if (ord >= 0) lists.get(r.word)?.push(ord);
    }
    for (const [w, l] of lists) this.words.set(w, Int32Array.from(l.sort((x, y) => x - y)));
  }
}
