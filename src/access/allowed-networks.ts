import type { NetworkRegistry } from '../chain/registry.ts';
import type { Project } from '../store/projects.ts';

/** The networks a request names: the relayer's path, the metadata `chainID` / `chainIDs`, the REST path. */
export function networksNamed(params: Record<string, string>, body: unknown): string[] {
  const out: string[] = [];
  if (params.network) out.push(params.network);
  const b = (body ?? {}) as { chainID?: unknown; chainIDs?: unknown };
  if (typeof b.chainID === 'string' || typeof b.chainID === 'number') out.push(String(b.chainID));
  if (Array.isArray(b.chainIDs)) for (const c of b.chainIDs) if (typeof c === 'string' || typeof c === 'number') out.push(String(c));
  return out;
}

/**
 * The first named network a project's key may not use, or undefined. A name no registry knows is
 * left to the method, which says so in its own words.
 */
export function refusedNetwork(project: Project | null, registry: NetworkRegistry, named: string[]): { name: string; chainId: number } | undefined {
  const allowed = project?.allowedChainIds;
  if (!allowed || named.length === 0) return undefined;
  for (const n of named) {
    const id = registry.chainIdOf(n);
    if (id !== undefined && !allowed.includes(id)) return { name: n, chainId: id };
  }
  return undefined;
}
