import type { NetworkRegistry } from '../chain/registry.ts';
import type { Project } from '../store/projects.ts';
import { refusedNetwork } from '../access/allowed-networks.ts';
import { RpcError, type ErrorDef } from './errors.ts';

export { networksNamed } from '../access/allowed-networks.ts';

/** Refuses a project's key on a network the project is not enabled for, in the caller's service's words. */
export function checkAllowedNetworks(project: Project | null, registry: NetworkRegistry, named: string[], refusal: ErrorDef): void {
  const refused = refusedNetwork(project, registry, named);
  if (refused) throw new RpcError(refusal, `network ${refused.name} (chain ${refused.chainId}) is not enabled for project ${project!.name}`);
}
