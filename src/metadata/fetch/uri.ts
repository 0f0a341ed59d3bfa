// Classifies a tokenURI into what must be done to obtain the document, without
// any I/O. Every spelling seen on chain is funnelled into a few kinds so the
// fetcher only has to know how to fetch http(s), gateways and inline bodies.

import { parseDataUri } from './data-uri.ts';
import type { FetchFailureReason } from '../errors.ts';
import { contentPathFromGatewayUrl, gatewayBase, ipfsGatewayUrls, looksLikeCid, normalizeContentPath, stripNamespacePrefix, type IpfsNamespace } from './ipfs-path.ts';

export { expandIdTemplate, hasIdTemplate } from '../tokens/id-template.ts';
export { ipfsGatewayUrls } from './ipfs-path.ts';

export type UriOptions = { ipfsGateways: readonly string[]; arweaveGateway: string };

export type ParsedUri =
  | { kind: 'http'; url: string }
  | { kind: 'ipfs'; path: string }
  | { kind: 'ipns'; path: string }
  | { kind: 'arweave'; url: string }
  | { kind: 'data'; mediaType: string; body: string }
  | { kind: 'json'; body: string }
  | { kind: 'invalid'; reason: Extract<FetchFailureReason, 'INVALID_URI' | 'UNSUPPORTED_SCHEME'>; message: string };

export const DEFAULT_ARWEAVE_GATEWAY = 'https://arweave.net/';

const SCHEME = /^([a-z][a-z0-9+.-]*):/i;
const ARWEAVE_ID = /^[A-Za-z0-9_-]+$/;
const ARWEAVE_TX = /^[A-Za-z0-9_-]{43}$/;
const ARWEAVE_HOSTS = new Set(['arweave.net', 'www.arweave.net', 'ar-io.net', 'arweave.dev']);

function invalid(reason: 'INVALID_URI' | 'UNSUPPORTED_SCHEME', message: string): ParsedUri {
  return { kind: 'invalid', reason, message };
}

// Contracts pad strings with NULs and whitespace more often than one would hope.
function clean(raw: string): string {
  return raw.replace(/^[\s\u0000\ufeff]+|[\s\u0000]+$/g, '');
}

function contentUri(namespace: IpfsNamespace, rest: string): ParsedUri {
  const path = normalizeContentPath(stripNamespacePrefix(rest, namespace), namespace);
  if (!path) return invalid('INVALID_URI', `not a valid ${namespace} path`);
  return { kind: namespace, path };
}

function arweaveUrl(rest: string, gateway: string): ParsedUri {
  const trimmed = rest.replace(/^\/+/, '');
  const [id] = trimmed.split(/[/?#]/, 1);
  if (!id || !ARWEAVE_ID.test(id)) return invalid('INVALID_URI', 'not a valid Arweave id');
  const withoutFragment = trimmed.split('#', 1)[0];
  try {
    return { kind: 'arweave', url: new URL(withoutFragment, withSlash(gateway)).href };
  } catch {
    return invalid('INVALID_URI', 'bad Arweave gateway');
  }
}

function withSlash(base: string): string {
  return base.endsWith('/') ? base : `${base}/`;
}

function configuredGatewayHosts(gateways: readonly string[]): Set<string> {
  const hosts = new Set<string>();
  for (const gateway of gateways) {
    try {
      hosts.add(new URL(gatewayBase(gateway)).host);
    } catch {
      // An unparseable gateway is a config error reported elsewhere; it just can't match here.
    }
  }
  return hosts;
}

function httpUri(raw: string, opts: UriOptions): ParsedUri {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return invalid('INVALID_URI', 'unparseable URL');
  }
  if (!url.hostname) return invalid('INVALID_URI', 'URL without host');
  const content = contentPathFromGatewayUrl(url, configuredGatewayHosts(opts.ipfsGateways));
  if (content) return { kind: content.namespace, path: content.path };
  if (ARWEAVE_HOSTS.has(url.hostname)) {
    const tx = url.pathname.split('/')[1];
    if (tx && ARWEAVE_TX.test(tx)) return arweaveUrl(url.pathname + url.search, opts.arweaveGateway);
  }
  url.hash = '';
  return { kind: 'http', url: url.href };
}

export function parseTokenUri(raw: string, opts: UriOptions): ParsedUri {
  const text = clean(raw);
  if (text === '') return invalid('INVALID_URI', 'empty URI');
  if (text.startsWith('{') || text.startsWith('[')) return { kind: 'json', body: text };

  const scheme = SCHEME.exec(text)?.[1].toLowerCase();
  if (scheme === undefined) return schemelessUri(text);
  const rest = text.slice(scheme.length + 1);
  switch (scheme) {
    case 'http':
    case 'https':
      return httpUri(text, opts);
    case 'ipfs':
      return contentUri('ipfs', rest.replace(/^\/+/, ''));
    case 'ipns':
      return contentUri('ipns', rest.replace(/^\/+/, ''));
    case 'ar':
      return arweaveUrl(rest, opts.arweaveGateway);
    case 'data': {
      const data = parseDataUri(text);
      if (!data) return invalid('INVALID_URI', 'malformed data: URI');
      return { kind: 'data', mediaType: data.mediaType, body: data.text };
    }
    default:
      return invalid('UNSUPPORTED_SCHEME', `unsupported scheme "${scheme}:"`);
  }
}

// Bare CIDs and "/ipfs/<cid>" paths are what some contracts store.
function schemelessUri(text: string): ParsedUri {
  const lower = text.toLowerCase();
  if (/^\/*ipns\//.test(lower)) return contentUri('ipns', text);
  if (/^\/*ipfs\//.test(lower)) return contentUri('ipfs', text);
  const root = text.split(/[/?#]/, 1)[0];
  if (looksLikeCid(root)) return contentUri('ipfs', text);
  return invalid('INVALID_URI', 'no scheme and not a CID');
}

/**
 * The URL an API client can load for a media field: gateway URLs for content
 * addresses, data: URIs unchanged, null when there is nothing loadable.
 */
export function toHttpMediaUrl(uri: string, opts: UriOptions): string | null {
  const parsed = parseTokenUri(uri, opts);
  switch (parsed.kind) {
    case 'http':
    case 'arweave':
      return parsed.url;
    case 'ipfs':
    case 'ipns':
      return ipfsGatewayUrls(parsed.path, opts.ipfsGateways.slice(0, 1), parsed.kind)[0] ?? null;
    case 'data':
      return clean(uri);
    case 'json':
    case 'invalid':
      return null;
  }
}

/** The share of fetch slots the configured IPFS and Arweave gateways draw from together (the operator's hosts). */
export const GATEWAY_SHARE = 'gateways';

/**
 * Where fetching this URI sends requests, for per-host shares (util/fair-gate.ts): the origin's
 * host and port, GATEWAY_SHARE for content addresses, '' for inline documents (no request at all).
 */
export function fetchShareOf(uri: string, opts: UriOptions): string {
  const parsed = parseTokenUri(uri, opts);
  switch (parsed.kind) {
    case 'http':
      try {
        return new URL(parsed.url).host.toLowerCase();
      } catch {
        return '';
      }
    case 'arweave':
    case 'ipfs':
    case 'ipns':
      return GATEWAY_SHARE;
    default:
      return '';
  }
}
