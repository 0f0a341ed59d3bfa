// Removes active content from untrusted SVG so clients can inline it.
//
// This is a re-serialising tokenizer, not a regex filter: the output is
// rebuilt only from tokens we understood, so whatever we fail to parse is
// dropped or escaped rather than passed through. Invariants of the output:
// no start tag of a dangerous element, no on* attribute, no attribute value
// that decodes to a script URL, no raw "<" outside tags we emitted.

const DROP_WITH_CONTENT = new Set([
  'script',
  'foreignobject',
  'iframe',
  'embed',
  'object',
  'handler', // SVG Tiny 1.2 event handler element
  'listener', // XML Events
  'meta',
  'link',
  'base',
]);

const NAME = /^[A-Za-z_][\w:.-]*$/;
const SCRIPT_URL = /(?:java|vb|live)script:/;
const URL_ATTRIBUTES = new Set(['href', 'src', 'action', 'formaction', 'from', 'to', 'values', 'by']);

const NAMED_ENTITIES: Record<string, string> = {
  amp: '&',
  lt: '<',
  gt: '>',
  quot: '"',
  apos: "'",
  colon: ':',
  tab: '\t',
  newline: '\n',
  nbsp: '\u00a0',
  lpar: '(',
  rpar: ')',
  sol: '/',
  period: '.',
  comma: ',',
};

function decodeEntities(text: string): string {
  return text.replace(/&(?:#x([0-9a-f]+);?|#(\d+);?|([a-z]+);)/gi, (match, hex?: string, dec?: string, name?: string) => {
    if (hex !== undefined || dec !== undefined) {
      const code = hex !== undefined ? parseInt(hex, 16) : Number(dec);
      return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : '';
    }
    return NAMED_ENTITIES[name!.toLowerCase()] ?? match;
  });
}

// Browsers ignore whitespace and control characters inside URL schemes.
function comparable(value: string): string {
  return decodeEntities(value)
    .replace(/[\s\u0000-\u001f\u007f-\u009f]/g, '')
    .toLowerCase();
}

function localName(name: string): string {
  const colon = name.lastIndexOf(':');
  return (colon === -1 ? name : name.slice(colon + 1)).toLowerCase();
}

function isAttributeSafe(name: string, value: string): boolean {
  const local = localName(name);
  if (local.startsWith('on')) return false;
  const v = comparable(value);
  if (SCRIPT_URL.test(v) || v.includes('expression(')) return false;
  if (URL_ATTRIBUTES.has(local) && v.startsWith('data:') && !v.startsWith('data:image/')) return false;
  // Animating an event handler or a link target would smuggle script in later.
  if (local === 'attributename' && (v.startsWith('on') || localName(v) === 'href')) return false;
  return true;
}

function escapeAttribute(raw: string): string {
  return raw.replace(/"/g, '&quot;').replace(/</g, '&lt;');
}

function escapeText(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

type StartTag = { name: string; attributes: string; selfClosing: boolean; end: number };

const TAG_END = /\s*(\/?)>/y;
const ATTRIBUTE = /\s*(?:([^\s/>="']+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>"']+)))?|\/(?!>))/y;

function parseStartTag(svg: string, start: number): StartTag | null {
  const nameMatch = /^<([A-Za-z_][\w:.-]*)/.exec(svg.slice(start, start + 256));
  if (!nameMatch) return null;
  let i = start + nameMatch[0].length;
  const kept: string[] = [];
  for (;;) {
    ATTRIBUTE.lastIndex = i;
    const match = ATTRIBUTE.exec(svg);
    if (!match || match[0].length === 0) break;
    i = ATTRIBUTE.lastIndex;
    const [, name, dq, sq, bare] = match;
    if (name === undefined) continue;
    const value = dq ?? sq ?? bare ?? '';
    if (NAME.test(name) && isAttributeSafe(name, value)) kept.push(` ${name}="${escapeAttribute(value)}"`);
  }
  TAG_END.lastIndex = i;
  const rest = TAG_END.exec(svg);
  if (!rest) return null;
  return { name: nameMatch[1], attributes: kept.join(''), selfClosing: rest[1] === '/', end: i + rest[0].length };
}

function skipDeclaration(svg: string, start: number): number {
  const close = svg.indexOf('>', start);
  const bracket = svg.indexOf('[', start);
  // An internal DTD subset may contain ">" inside entity declarations.
  if (bracket !== -1 && (close === -1 || bracket < close)) {
    const subsetEnd = svg.indexOf(']', bracket);
    const after = subsetEnd === -1 ? -1 : svg.indexOf('>', subsetEnd);
    return after === -1 ? svg.length : after + 1;
  }
  return close === -1 ? svg.length : close + 1;
}

function indexAfter(svg: string, token: string, from: number): number {
  const at = svg.indexOf(token, from);
  return at === -1 ? svg.length : at + token.length;
}

export function sanitizeSvg(svg: string): string {
  const out: string[] = [];
  // Name and nesting depth of the element whose subtree is being dropped.
  let dropping: { name: string; depth: number } | null = null;
  const emit = (text: string): void => {
    if (!dropping) out.push(text);
  };

  let i = 0;
  while (i < svg.length) {
    const lt = svg.indexOf('<', i);
    if (lt === -1) {
      emit(svg.slice(i).replace(/>/g, '&gt;'));
      break;
    }
    if (lt > i) emit(svg.slice(i, lt).replace(/>/g, '&gt;'));
    i = lt;

    if (svg.startsWith('<!--', i)) {
      i = indexAfter(svg, '-->', i + 4);
    } else if (svg.startsWith('<![CDATA[', i)) {
      const end = svg.indexOf(']]>', i + 9);
      // Re-expressed as escaped text: identical in XML, and inert if a client
      // inlines it into HTML outside the svg element.
      emit(escapeText(svg.slice(i + 9, end === -1 ? svg.length : end)));
      i = end === -1 ? svg.length : end + 3;
    } else if (svg.startsWith('<!', i)) {
      i = skipDeclaration(svg, i + 2);
    } else if (svg.startsWith('<?', i)) {
      const end = indexAfter(svg, '?>', i + 2);
      const instruction = svg.slice(i, end);
      // Only the XML declaration survives; stylesheet instructions can pull in remote content.
      if (i === 0 && /^<\?xml\s[^<>]*\?>$/.test(instruction)) emit(instruction);
      i = end;
    } else if (svg.startsWith('</', i)) {
      const endTag = /^<\/\s*([A-Za-z_][\w:.-]*)\s*>/.exec(svg.slice(i, i + 256));
      if (!endTag) {
        emit('&lt;');
        i += 1;
        continue;
      }
      const local = localName(endTag[1]);
      if (dropping) {
        if (local === dropping.name && --dropping.depth === 0) dropping = null;
      } else if (!DROP_WITH_CONTENT.has(local)) {
        out.push(`</${endTag[1]}>`);
      }
      i += endTag[0].length;
    } else {
      const tag = parseStartTag(svg, i);
      if (!tag) {
        // Not a tag we can parse: if it looked like one, drop the remainder rather than guess.
        if (/^<[A-Za-z_]/.test(svg.slice(i, i + 2))) break;
        emit('&lt;');
        i += 1;
        continue;
      }
      const local = localName(tag.name);
      i = tag.end;
      if (dropping) {
        if (local === dropping.name && !tag.selfClosing) dropping.depth++;
      } else if (DROP_WITH_CONTENT.has(local)) {
        if (tag.selfClosing) continue;
        if (local === 'script') {
          // Script content is raw text to an HTML parser: cut at the first close tag.
          const close = /<\/\s*(?:[\w.-]+:)?script\s*>/i.exec(svg.slice(i));
          i = close ? i + close.index + close[0].length : svg.length;
        } else {
          dropping = { name: local, depth: 1 };
        }
      } else {
        out.push(`<${tag.name}${tag.attributes}${tag.selfClosing ? '/>' : '>'}`);
      }
    }
  }
  return out.join('');
}
