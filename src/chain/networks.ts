/** Well-known EVM networks, so names resolve before any RPC URL is configured. */
export interface NetworkInfo {
  chainId: number;
  name: string;
  title: string;
  testnet: boolean;
  aliases?: string[];
}

export const KNOWN_NETWORKS: readonly NetworkInfo[] = Object.freeze([
  { chainId: 1, name: 'mainnet', title: 'Ethereum', testnet: false, aliases: ['ethereum', 'eth'] },
  { chainId: 11155111, name: 'sepolia', title: 'Sepolia', testnet: true },
  { chainId: 17000, name: 'holesky', title: 'Holesky', testnet: true },
  { chainId: 137, name: 'polygon', title: 'Polygon', testnet: false, aliases: ['matic'] },
  { chainId: 80002, name: 'amoy', title: 'Polygon Amoy', testnet: true, aliases: ['polygon-amoy'] },
  { chainId: 1101, name: 'polygon-zkevm', title: 'Polygon zkEVM', testnet: false },
  { chainId: 42161, name: 'arbitrum', title: 'Arbitrum One', testnet: false, aliases: ['arbitrum-one'] },
  { chainId: 42170, name: 'arbitrum-nova', title: 'Arbitrum Nova', testnet: false },
  { chainId: 421614, name: 'arbitrum-sepolia', title: 'Arbitrum Sepolia', testnet: true },
  { chainId: 10, name: 'optimism', title: 'OP Mainnet', testnet: false, aliases: ['op'] },
  { chainId: 11155420, name: 'optimism-sepolia', title: 'OP Sepolia', testnet: true },
  { chainId: 8453, name: 'base', title: 'Base', testnet: false },
  { chainId: 84532, name: 'base-sepolia', title: 'Base Sepolia', testnet: true },
  { chainId: 56, name: 'bsc', title: 'BNB Smart Chain', testnet: false, aliases: ['bnb'] },
  { chainId: 97, name: 'bsc-testnet', title: 'BNB Smart Chain Testnet', testnet: true },
  { chainId: 43114, name: 'avalanche', title: 'Avalanche C-Chain', testnet: false, aliases: ['avax'] },
  { chainId: 43113, name: 'avalanche-testnet', title: 'Avalanche Fuji', testnet: true, aliases: ['fuji'] },
  { chainId: 100, name: 'gnosis', title: 'Gnosis Chain', testnet: false, aliases: ['xdai'] },
  { chainId: 324, name: 'zksync', title: 'zkSync Era', testnet: false, aliases: ['zksync-era'] },
  { chainId: 59144, name: 'linea', title: 'Linea', testnet: false },
  { chainId: 534352, name: 'scroll', title: 'Scroll', testnet: false },
  { chainId: 81457, name: 'blast', title: 'Blast', testnet: false },
  { chainId: 42220, name: 'celo', title: 'Celo', testnet: false },
  { chainId: 250, name: 'fantom', title: 'Fantom Opera', testnet: false },
  { chainId: 1284, name: 'moonbeam', title: 'Moonbeam', testnet: false },
  { chainId: 5000, name: 'mantle', title: 'Mantle', testnet: false },
  { chainId: 660279, name: 'xai', title: 'Xai', testnet: false },
  { chainId: 13371, name: 'immutable-zkevm', title: 'Immutable zkEVM', testnet: false },
  { chainId: 1868, name: 'soneium', title: 'Soneium', testnet: false },
  { chainId: 146, name: 'sonic', title: 'Sonic', testnet: false },
  { chainId: 33139, name: 'apechain', title: 'ApeChain', testnet: false },
  { chainId: 7777777, name: 'zora', title: 'Zora', testnet: false },
  { chainId: 31337, name: 'anvil', title: 'Anvil (local)', testnet: true, aliases: ['localhost', 'hardhat'] },
]);

const byKey = new Map<string, NetworkInfo>();
for (const n of KNOWN_NETWORKS) {
  byKey.set(String(n.chainId), n);
  byKey.set(n.name, n);
  for (const a of n.aliases ?? []) byKey.set(a, n);
}

/** Normalises a user-supplied chain reference: decimal or 0x id, or a name (any case). */
export function chainKey(input: string): string {
  const s = input.trim().toLowerCase();
  if (/^0x[0-9a-f]+$/.test(s)) return String(parseInt(s, 16));
  if (/^\d+$/.test(s)) return String(Number(s));
  return s;
}

export function lookupKnownNetwork(input: string): NetworkInfo | undefined {
  return byKey.get(chainKey(input));
}
