import { describe, expect, it } from 'vitest';
import { isBlockedAddress, parseIPv6 } from '../src/untrusted/ip.ts';
import { normalizeTokenDocument, sanitizeSvg } from '../src/metadata/tokens/normalize.ts';
import { expandIdTemplate, ipfsGatewayUrls, parseTokenUri, toHttpMediaUrl, type ParsedUri } from '../src/metadata/fetch/uri.ts';

const CID0 = 'QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG';
const CID1 = 'bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi';
const IPNS_KEY = 'k51qzi5uqu5dlvj2baxnqndepeb86cbk3ng7n3i46uzyxzyqj2xjonzllnv0v8';
const TXID = 'bNbA3TEQVL60xlgCcqdz4ZPHFZ711cZ3hmkpGttDt_U';
const opts = { ipfsGateways: ['https://gw.example/ipfs/', 'https://second.example'], arweaveGateway: 'https://ar.example/' };

const b64 = (text: string): string => Buffer.from(text, 'utf8').toString('base64');

describe('isBlockedAddress', () => {
  const blocked = [
    '127.0.0.1',
    '127.255.255.254',
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '100.127.255.255',
    '0.0.0.0',
    '0.1.2.3',
    '255.255.255.255',
    '224.0.0.1',
    '239.255.255.250',
    '240.0.0.1',
    '192.0.0.8',
    '192.0.2.1',
    '198.18.0.1',
    '198.51.100.7',
    '203.0.113.9',
    '::',
    '::1',
    '[::1]',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '0:0:0:0:0:ffff:7f00:0001',
    '::ffff:10.0.0.1',
    '::ffff:169.254.169.254',
    '::ffff:0.0.0.0',
    '::ffff:0:127.0.0.1',
    '::127.0.0.1',
    '::8.8.8.8',
    '64:ff9b::7f00:1',
    '64:ff9b::10.0.0.1',
    '64:ff9b:1::1',
    '100::1',
    'fd00::1',
    'fc00::1',
    'fdff:ffff::1',
    'fe80::1',
    'fe80::1%eth0',
    'febf::1',
    'fec0::1',
    'ff02::1',
    'ff0e::1',
    '2001::1',
    '2001:db8::1',
    '2002:7f00:1::1',
    '2002:c0a8:101::1',
    '3fff::1',
    '5f00::1',
    // Unparseable or ambiguous spellings fail closed.
    '',
    'localhost',
    'not-an-ip',
    '127.1',
    '0x7f.0.0.1',
    '010.0.0.1',
    '256.1.1.1',
    '1:2:3:4:5:6:7:8:9',
    '1::2::3',
    '1:2:3:4:5:6:7:8::',
  ];
  const allowed = [
    '8.8.8.8',
    '1.1.1.1',
    '172.32.0.1',
    '100.128.0.1',
    '192.169.0.1',
    '11.0.0.1',
    '2606:4700::1111',
    '[2606:4700::1111]',
    '2001:4860:4860::8888',
    '2a00:1450:4001:80b::200e',
    '::ffff:8.8.8.8',
    '::ffff:808:808',
    '64:ff9b::808:808',
    '2002:808:808::1',
  ];

  it.each(blocked)('blocks %s', (ip) => expect(isBlockedAddress(ip)).toBe(true));
  it.each(allowed)('allows %s', (ip) => expect(isBlockedAddress(ip)).toBe(false));

  it('parses IPv6 spellings to the same value', () => {
    expect(parseIPv6('::ffff:127.0.0.1')).toBe(parseIPv6('::ffff:7f00:1'));
    expect(parseIPv6('0:0:0:0:0:0:0:1')).toBe(1n);
    expect(parseIPv6('1::')).toBe(1n << 112n);
  });
});

describe('parseTokenUri', () => {
  const ipfs = (path: string): ParsedUri => ({ kind: 'ipfs', path });
  const cases: [string, ParsedUri][] = [
    [`ipfs://${CID0}/1.json`, ipfs(`${CID0}/1.json`)],
    [`ipfs://ipfs/${CID0}/1.json`, ipfs(`${CID0}/1.json`)],
    [`ipfs:///ipfs/${CID0}/1.json`, ipfs(`${CID0}/1.json`)],
    [`IPFS://${CID1}`, ipfs(CID1)],
    [CID0, ipfs(CID0)],
    [`${CID1}/1.json`, ipfs(`${CID1}/1.json`)],
    [`/ipfs/${CID0}/1.json`, ipfs(`${CID0}/1.json`)],
    [`https://ipfs.io/ipfs/${CID0}/1.json`, ipfs(`${CID0}/1.json`)],
    [`https://gateway.pinata.cloud/ipfs/${CID0}/1.json`, ipfs(`${CID0}/1.json`)],
    [`https://cloudflare-ipfs.com/ipfs/${CID0}/1.json`, ipfs(`${CID0}/1.json`)],
    [`https://nftstorage.link/ipfs/${CID0}/1.json`, ipfs(`${CID0}/1.json`)],
    [`https://mycollection.mypinata.cloud/ipfs/${CID0}/1.json`, ipfs(`${CID0}/1.json`)],
    [`https://${CID1}.ipfs.dweb.link/1.json`, ipfs(`${CID1}/1.json`)],
    [`https://${CID1}.ipfs.nftstorage.link/`, ipfs(CID1)],
    [`https://gw.example/ipfs/${CID0}/1.json?x=1#frag`, ipfs(`${CID0}/1.json?x=1`)],
    [`ipfs://${CID0}/My File.json`, ipfs(`${CID0}/My%20File.json`)],
    [`ipfs://${CID0}/a%20b.json`, ipfs(`${CID0}/a%20b.json`)],
    [`ipfs://${CID0}/../../etc/passwd`, ipfs(`${CID0}/etc/passwd`)],
    [`  ipfs://${CID0}/1.json\u0000\u0000 `, ipfs(`${CID0}/1.json`)],
    [`ipns://${IPNS_KEY}/x.json`, { kind: 'ipns', path: `${IPNS_KEY}/x.json` }],
    ['ipns://app.example.org/meta.json', { kind: 'ipns', path: 'app.example.org/meta.json' }],
    ['https://ipfs.io/ipns/app.example.org/x', { kind: 'ipns', path: 'app.example.org/x' }],
    ['https://app-example-org.ipns.dweb.link/x', { kind: 'ipns', path: 'app.example.org/x' }],
    [`ar://${TXID}/1.json`, { kind: 'arweave', url: `https://ar.example/${TXID}/1.json` }],
    [`ar://${TXID}`, { kind: 'arweave', url: `https://ar.example/${TXID}` }],
    [`https://arweave.net/${TXID}`, { kind: 'arweave', url: `https://ar.example/${TXID}` }],
    ['https://example.com/meta/1.json#frag', { kind: 'http', url: 'https://example.com/meta/1.json' }],
    ['http://example.com/x?y=1', { kind: 'http', url: 'http://example.com/x?y=1' }],
    // A self-hosted gateway may be the only place the content is pinned, so it is left alone.
    [`https://ipfs.mycollection.xyz/ipfs/${CID0}`, { kind: 'http', url: `https://ipfs.mycollection.xyz/ipfs/${CID0}` }],
    ['{"name":"On chain"}', { kind: 'json', body: '{"name":"On chain"}' }],
  ];
  it.each(cases)('%s', (raw, expected) => expect(parseTokenUri(raw, opts)).toEqual(expected));

  const invalid: [string, string][] = [
    ['', 'INVALID_URI'],
    ['   ', 'INVALID_URI'],
    ['not a uri', 'INVALID_URI'],
    ['ipfs://', 'INVALID_URI'],
    ['ipfs://bad$cid/x', 'INVALID_URI'],
    ['ar://', 'INVALID_URI'],
    ['https://', 'INVALID_URI'],
    ['data:application/json;base64', 'INVALID_URI'],
    ['data:application/json;base64,not*base64', 'INVALID_URI'],
    ['ftp://example.com/x.json', 'UNSUPPORTED_SCHEME'],
    ['javascript:alert(1)', 'UNSUPPORTED_SCHEME'],
    ['file:///etc/passwd', 'UNSUPPORTED_SCHEME'],
  ];
  it.each(invalid)('rejects %j as %s', (raw, reason) => {
    expect(parseTokenUri(raw, opts)).toMatchObject({ kind: 'invalid', reason });
  });
});

describe('data: URIs', () => {
  const json = '{"name":"Zoë","description":"100% on-chain"}';
  const cases: [string, string, string][] = [
    ['base64', `data:application/json;base64,${b64(json)}`, json],
    ['base64, url-safe, unpadded', `data:application/json;base64,${b64(json).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')}`, json],
    ['base64 with line breaks', `data:application/json;base64,${b64(json).replace(/(.{10})/g, '$1\n')}`, json],
    ['percent-encoded base64', `data:application/json;base64,${b64('{"a":1}').replace(/=/g, '%3D')}`, '{"a":1}'],
    ['percent-encoded', `data:application/json,${encodeURIComponent(json)}`, json],
    ['utf8 pseudo-encoding, raw JSON', `data:application/json;utf8,${json}`, json],
    ['charset parameter', `data:application/json;charset=UTF-8,${encodeURIComponent(json)}`, json],
    ['latin-1 charset', 'data:application/json;charset=iso-8859-1,%7B%22n%22%3A%22caf%E9%22%7D', '{"n":"café"}'],
    ['no media type', `data:,${encodeURIComponent(json)}`, json],
    ['raw JSON with a hex-looking percent', 'data:application/json,{"d":"50%DEAL"}', '{"d":"50%DEAL"}'],
    ['base64 with charset', `data:application/json;charset=utf-8;base64,${b64(json)}`, json],
  ];
  it.each(cases)('%s', (_label, uri, body) => {
    const parsed = parseTokenUri(uri, opts);
    expect(parsed).toMatchObject({ kind: 'data', body });
  });

  it('keeps the media type lower-cased and defaults it', () => {
    expect(parseTokenUri('data:Application/JSON;base64,e30=', opts)).toEqual({ kind: 'data', mediaType: 'application/json', body: '{}' });
    expect(parseTokenUri('data:;base64,e30=', opts)).toEqual({ kind: 'data', mediaType: 'text/plain', body: '{}' });
  });
});

describe('expandIdTemplate', () => {
  it('puts the spec form first, then the spellings collections actually use', () => {
    const pad = '000000000000000000000000000000000000000000000000000000000000000a';
    expect(expandIdTemplate('https://x.example/{id}.json', 10n)).toEqual([
      `https://x.example/${pad}.json`,
      'https://x.example/10.json',
      'https://x.example/a.json',
      'https://x.example/0xa.json',
      `https://x.example/0x${pad}.json`,
    ]);
  });

  it('replaces every occurrence, case-insensitively', () => {
    const [first, decimal] = expandIdTemplate('ipfs://cid/{ID}/{id}.json', 255n);
    expect(first).toBe(`ipfs://cid/${'ff'.padStart(64, '0')}/${'ff'.padStart(64, '0')}.json`);
    expect(decimal).toBe('ipfs://cid/255/255.json');
  });

  it('drops duplicate spellings and leaves template-free URIs alone', () => {
    expect(expandIdTemplate('https://x.example/{id}', 1n)).toHaveLength(4);
    expect(expandIdTemplate('https://x.example/1.json', 1n)).toEqual(['https://x.example/1.json']);
  });

  it('handles the full uint256 range and rejects ids outside it', () => {
    const max = (1n << 256n) - 1n;
    expect(expandIdTemplate('{id}', max)[0]).toBe('f'.repeat(64));
    expect(() => expandIdTemplate('{id}', -1n)).toThrow(RangeError);
    expect(() => expandIdTemplate('{id}', max + 1n)).toThrow(RangeError);
  });
});

describe('gateway URLs', () => {
  it('accepts every spelling of a gateway base', () => {
    const gateways = ['https://a.example', 'https://b.example/', 'https://c.example/ipfs/', 'https://d.example/ipfs'];
    expect(ipfsGatewayUrls(`${CID0}/1.json`, gateways)).toEqual([
      `https://a.example/ipfs/${CID0}/1.json`,
      `https://b.example/ipfs/${CID0}/1.json`,
      `https://c.example/ipfs/${CID0}/1.json`,
      `https://d.example/ipfs/${CID0}/1.json`,
    ]);
    expect(ipfsGatewayUrls('app.example.org/x', ['https://c.example/ipfs/'], 'ipns')).toEqual(['https://c.example/ipns/app.example.org/x']);
  });

  it('turns media references into loadable URLs', () => {
    expect(toHttpMediaUrl(`ipfs://${CID0}/img.png`, opts)).toBe(`https://gw.example/ipfs/${CID0}/img.png`);
    expect(toHttpMediaUrl(`https://cloudflare-ipfs.com/ipfs/${CID0}`, opts)).toBe(`https://gw.example/ipfs/${CID0}`);
    expect(toHttpMediaUrl(`ar://${TXID}`, opts)).toBe(`https://ar.example/${TXID}`);
    expect(toHttpMediaUrl('https://example.com/a.png', opts)).toBe('https://example.com/a.png');
    expect(toHttpMediaUrl('data:image/png;base64,iVBORw0KGgo=', opts)).toBe('data:image/png;base64,iVBORw0KGgo=');
    expect(toHttpMediaUrl('{"a":1}', opts)).toBeNull();
    expect(toHttpMediaUrl('javascript:alert(1)', opts)).toBeNull();
    expect(toHttpMediaUrl(`ipfs://${CID0}`, { ...opts, ipfsGateways: [] })).toBeNull();
  });
});

describe('sanitizeSvg', () => {
  const cases: [string, string, RegExp][] = [
    ['script element', '<svg><script>alert(1)</script><circle r="1"/></svg>', /script|alert/i],
    ['upper-case script', '<svg><SCRIPT type="text/javascript">alert(1)</SCRIPT></svg>', /script|alert/i],
    ['prefixed script', '<svg:svg><svg:script>alert(1)</svg:script></svg:svg>', /script|alert/i],
    ['unterminated script', '<svg><script>alert(1)', /script|alert/i],
    ['event attributes', `<svg onload="alert(1)"><rect onclick='x()' width="1"/></svg>`, /onload|onclick|alert/i],
    ['javascript href', '<svg><a href="javascript:alert(1)"><text>x</text></a></svg>', /javascript/i],
    ['obfuscated javascript href', '<svg><a xlink:href="jav&#x09;ascript&colon;alert(1)">x</a></svg>', /href|alert/i],
    ['foreignObject', '<svg><foreignObject><body onload="x()"><p>hi</p></body></foreignObject><g/></svg>', /foreignObject|body|onload/i],
    ['animated href', '<svg><a><animate attributeName="href" values="javascript:alert(1)"/></a></svg>', /javascript/i],
    ['animated handler', '<svg><set attributeName="onmouseover" to="alert(1)"/></svg>', /onmouseover/i],
    ['DOCTYPE entities', '<!DOCTYPE svg [<!ENTITY x "<script>alert(1)</script>">]><svg>&x;</svg>', /DOCTYPE|ENTITY|<script/i],
    ['CDATA markup', '<svg><![CDATA[><img src=x onerror=alert(1)>]]></svg>', /<img|<script/i],
    ['markup inside style', '<svg><style><img src=x onerror=alert(1)></style></svg>', /onerror/i],
    ['html data URL', '<svg><a href="data:text/html,<script>alert(1)</script>">x</a></svg>', /data:text|<script/i],
    ['stylesheet instruction', '<?xml-stylesheet href="https://evil.example/x.xsl"?><svg/>', /evil/],
    ['iframe', '<svg><iframe src="https://evil.example"></iframe></svg>', /iframe|evil/],
  ];
  it.each(cases)('removes %s', (_label, input, forbidden) => {
    expect(sanitizeSvg(input)).not.toMatch(forbidden);
  });

  it('keeps benign SVG byte-for-byte', () => {
    const svg =
      '<?xml version="1.0" encoding="UTF-8"?><svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 10 10">' +
      '<style>.a{fill:#f00}</style><rect class="a" width="10" height="10"/><text x="1">a &amp; b</text></svg>';
    expect(sanitizeSvg(svg)).toBe(svg);
  });

  it('keeps content around removed elements and image data URLs', () => {
    const out = sanitizeSvg('<svg><script>x</script><g><image href="data:image/png;base64,AAAA"/></g></svg>');
    expect(out).toBe('<svg><g><image href="data:image/png;base64,AAAA"/></g></svg>');
  });
});

describe('normalizeTokenDocument', () => {
  it('coerces text fields and numeric strings', () => {
    const { metadata } = normalizeTokenDocument({ name: 123, description: null, decimals: '18' }, opts);
    expect(metadata).toMatchObject({ name: '123', description: '', decimals: 18 });
    expect(normalizeTokenDocument({}, opts).metadata).toMatchObject({ name: '', description: '', image: null, decimals: null });
    for (const bad of ['abc', -1, 1.5, '', 300]) {
      expect(normalizeTokenDocument({ decimals: bad }, opts).metadata.decimals).toBeNull();
    }
    expect(normalizeTokenDocument({ properties: { decimals: 6 } }, opts).metadata.decimals).toBe(6);
  });

  it('accepts image aliases, preferring image', () => {
    for (const key of ['image_url', 'imageUrl', 'image_uri']) {
      expect(normalizeTokenDocument({ [key]: 'https://img.example/a.png' }, opts).metadata.image).toBe('https://img.example/a.png');
    }
    const both = normalizeTokenDocument({ image: 'https://img.example/main.png', image_url: 'https://img.example/alt.png' }, opts);
    expect(both.metadata.image).toBe('https://img.example/main.png');
  });

  it('exposes content-addressed media through the first gateway and keeps the original', () => {
    const doc = { image: `ipfs://${CID0}/1.png`, animation_url: `ar://${TXID}` };
    const { metadata, raw } = normalizeTokenDocument(doc, opts);
    expect(metadata.image).toBe(`https://gw.example/ipfs/${CID0}/1.png`);
    expect(metadata.imageOriginal).toBe(`ipfs://${CID0}/1.png`);
    expect(metadata.animationUrl).toBe(`https://ar.example/${TXID}`);
    expect(raw).toBe(doc);
    expect(raw.image).toBe(`ipfs://${CID0}/1.png`);
  });

  it('passes attributes and properties through exactly', () => {
    const attributes = [
      { trait_type: 'Eyes', value: 'Blue' },
      { display_type: 'number', trait_type: 'Level', value: '5' },
    ];
    const properties = { rarity: { name: 'Rarity', value: 'rare' } };
    expect(normalizeTokenDocument({ attributes }, opts).metadata).toMatchObject({ attributes, properties: null });
    expect(normalizeTokenDocument({ attributes }, opts).metadata.attributes).toBe(attributes);
    expect(normalizeTokenDocument({ properties }, opts).metadata).toMatchObject({ attributes: null, properties });
    const both = normalizeTokenDocument({ attributes, properties }, opts).metadata;
    expect(both.attributes).toBe(attributes);
    expect(both.properties).toBe(properties);
    const map = { Eyes: 'Blue' };
    expect(normalizeTokenDocument({ attributes: map }, opts).metadata.attributes).toBe(map);
  });

  it('sanitises inline SVG and SVG data URIs', () => {
    const evil = '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><script>alert(2)</script><rect width="1"/></svg>';
    const { metadata } = normalizeTokenDocument({ image_data: evil, image: `data:image/svg+xml;base64,${b64(evil)}`, animation_url: `data:image/svg+xml;utf8,${evil}` }, opts);
    expect(metadata.imageData).toBe('<svg xmlns="http://www.w3.org/2000/svg"><rect width="1"/></svg>');
    for (const uri of [metadata.image!, metadata.animationUrl!]) {
      const svg = Buffer.from(uri.replace('data:image/svg+xml;base64,', ''), 'base64').toString('utf8');
      expect(svg).toBe('<svg xmlns="http://www.w3.org/2000/svg"><rect width="1"/></svg>');
    }
  });

  it('drops unsafe links and normalises colours', () => {
    const { metadata } = normalizeTokenDocument(
      {
        external_url: 'javascript:alert(1)',
        youtube_url: 'https://youtube.com/watch?v=x',
        background_color: '#FFAA00',
        image: 'data:text/html,<script>alert(1)</script>',
        animation_url: 'data:text/html;base64,PGgxPmhpPC9oMT4=',
      },
      opts,
    );
    expect(metadata.externalUrl).toBeNull();
    expect(metadata.youtubeUrl).toBe('https://youtube.com/watch?v=x');
    expect(metadata.backgroundColor).toBe('ffaa00');
    expect(metadata.image).toBeNull();
    expect(metadata.animationUrl).toBe('data:text/html;base64,PGgxPmhpPC9oMT4=');
    expect(normalizeTokenDocument({ background_color: 'red' }, opts).metadata.backgroundColor).toBeNull();
    expect(normalizeTokenDocument({ external_url: `ipfs://${CID0}` }, opts).metadata.externalUrl).toBe(`https://gw.example/ipfs/${CID0}`);
  });
});
