// How deeply a JSON text nests its arrays and objects, read without parsing it. V8's JSON.parse
// copes with any depth, but JSON.stringify, jsonb and every recursive walk downstream do not: a
// document 5 000 levels deep overflowed the stack when its save batch was serialised. This scan
// is iterative, so the depth of a hostile text costs nothing but one pass over it.

/** True when `text` opens more than `limit` arrays/objects inside one another. */
export function nestsDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c /* \ */) i++;
      else if (c === 0x22 /* " */) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (++depth > limit) return true;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      depth--;
    }
  }
  return false;
}
