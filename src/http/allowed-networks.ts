import type { NetworkRegistry } from '../chain/registry.ts';
import type { Project } from '../store/projects.ts';
import { RpcError, type ErrorDef } from './errors.ts';

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
 * Refuses a project's key on a network the project is not enabled for. A name no registry knows
 * is left to the method, which says so in its own words.
 */
export function checkAllowedNetworks(project: Project | null, registry: NetworkRegistry, named: string[], refusal: ErrorDef): void {
  const allowed = project?.allowedChainIds;
  if (!allowed || named.length === 0) return;
  for (const n of named) {
    const id = registry.chainIdOf(n);
    if (id !== undefined && !allowed.includes(id)) {
      throw new RpcError(refusal, `network ${n} (chain ${id}) is not enabled for project ${project.name}`);
    }
  }
}
