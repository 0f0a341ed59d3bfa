// Recognising IPFS/IPNS content addresses in the many spellings collections
// use, and turning them back into gateway URLs.

export type IpfsNamespace = 'ipfs' | 'ipns';

const CID_PATTERNS: readonly RegExp[] = [
  /^Qm[1-9A-HJ-NP-Za-km-z]{44}$/, // CIDv0, base58btc sha2-256
  /^b[a-z2-7]{50,}$/, // CIDv1 base32 (bafy…, bafk…)
  /^B[A-Z2-7]{50,}$/, // CIDv1 base32upper
  /^k[0-9a-z]{40,}$/, // CIDv1 base36, common for IPNS keys
  /^z[1-9A-HJ-NP-Za-km-z]{40,}$/, // CIDv1 base58btc
  /^f[0-9a-f]{60,}$/, // CIDv1 base16
];

export function looksLikeCid(text: string): boolean {
  return CID_PATTERNS.some((pattern) => pattern.test(text));
}

// Hosts whose /ipfs/ paths are interchangeable with any other gateway. Many are
// slow, rate-limited or shut down (cloudflare-ipfs.com), so we re-route them.
const PUBLIC_GATEWAY_HOSTS = new Set([
  'ipfs.io',
  'gateway.ipfs.io',
  'dweb.link',
  'gateway.pinata.cloud',
  'cloudflare-ipfs.com',
  'cf-ipfs.com',
  'nftstorage.link',
  'w3s.link',
  'ipfs.infura.io',
  'infura-ipfs.io',
  'ipfs.fleek.co',
  'ipfs.filebase.io',
  '4everland.io',
  'gateway.lighthouse.storage',
  'ipfs.runfission.com',
  'hardbin.com',
]);

const PUBLIC_GATEWAY_SUFFIXES = ['.mypinata.cloud', '.infura-ipfs.io'];

export function isPublicGatewayHost(host: string): boolean {
  return PUBLIC_GATEWAY_HOSTS.has(host) || PUBLIC_GATEWAY_SUFFIXES.some((suffix) => host.endsWith(suffix));
}

const IPFS_ROOT = /^[A-Za-z0-9]+$/;
const IPNS_ROOT = /^[A-Za-z0-9.-]+$/;

function safeDecode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

/**
 * Canonical "<root>/<path>[?query]" with each segment percent-encoded once,
 * or null when the root is not a plausible CID / IPNS name.
 */
export function normalizeContentPath(text: string, namespace: IpfsNamespace): string | null {
  const hash = text.indexOf('#');
  const withoutFragment = hash === -1 ? text : text.slice(0, hash);
  const q = withoutFragment.indexOf('?');
  const pathPart = q === -1 ? withoutFragment : withoutFragment.slice(0, q);
  const query = q === -1 ? '' : withoutFragment.slice(q);

  const [root, ...rest] = pathPart.split('/');
  const rootPattern = namespace === 'ipfs' ? IPFS_ROOT : IPNS_ROOT;
  if (!root || !rootPattern.test(root)) return null;
  // Dot segments would let a path climb out of /ipfs/<cid>/ on the gateway.
  const tail = rest
    .map((segment) => safeDecode(segment))
    .filter((segment) => segment !== '.' && segment !== '..')
    .map((segment) => encodeURIComponent(segment))
    .join('/');
  return (rest.length > 0 ? `${root}/${tail}` : root) + query;
}

/** Strips every "ipfs/" (or "ipns/") prefix spelling: "/ipfs/x", "ipfs/x", "//ipfs/x". */
export function stripNamespacePrefix(text: string, namespace: IpfsNamespace): string {
  let s = text.replace(/^\/+/, '');
  const prefix = `${namespace}/`;
  while (s.toLowerCase().startsWith(prefix)) s = s.slice(prefix.length).replace(/^\/+/, '');
  return s;
}

/**
 * Recognises gateway URLs: path style "https://gw/ipfs/<cid>/x" on known or
 * configured gateways, and subdomain style "https://<cid>.ipfs.<gw>/x" anywhere.
 */
export function contentPathFromGatewayUrl(url: URL, configuredHosts: ReadonlySet<string>): { namespace: IpfsNamespace; path: string } | null {
  const labels = url.hostname.split('.');
  if (labels.length >= 3 && (labels[1] === 'ipfs' || labels[1] === 'ipns')) {
    const namespace = labels[1] as IpfsNamespace;
    const root = namespace === 'ipns' ? decodeInlinedDnsLink(labels[0]) : labels[0];
    if (namespace === 'ipns' || looksLikeCid(root)) {
      const path = normalizeContentPath(root + (url.pathname === '/' ? '' : url.pathname) + url.search, namespace);
      if (path) return { namespace, path };
    }
  }

  if (!isPublicGatewayHost(url.hostname) && !configuredHosts.has(url.host)) return null;
  const match = /^\/(ipfs|ipns)\/(.+)$/i.exec(url.pathname);
  if (!match) return null;
  const namespace = match[1].toLowerCase() as IpfsNamespace;
  const path = normalizeContentPath(match[2] + url.search, namespace);
  return path ? { namespace, path } : null;
}

// Subdomain gateways inline DNSLink names: "-" stands for "." and "--" for "-".
function decodeInlinedDnsLink(label: string): string {
  if (looksLikeCid(label) || !label.includes('-')) return label;
  return label.replace(/--|-/g, (m) => (m === '--' ? '-' : '.'));
}

/** Gateway URLs for a content path, one per gateway, in the given order. */
export function ipfsGatewayUrls(path: string, gateways: readonly string[], namespace: IpfsNamespace = 'ipfs'): string[] {
  return gateways.map((gateway) => `${gatewayBase(gateway)}/${namespace}/${path}`);
}

/** Accepts "https://gw", "https://gw/" and "https://gw/ipfs/" spellings of a gateway. */
export function gatewayBase(gateway: string): string {
  return gateway.replace(/\/+$/, '').replace(/\/(ipfs|ipns)$/i, '');
}
