import { z } from 'zod';
import { AddressArg, MetadataErrors, type MethodDef, RpcError, method } from '../../http/index.ts';
import { MAX_FEATURE_INDEX } from '../../metadata/contracts/directory.ts';
import { chainIdArg, type ConsoleArgDeps } from '../args.ts';
import type { ConsoleDeps } from '../deps.ts';
import type { Services } from '../../services.ts';

/** What the directory methods use: the token directory, and the chains' lookup. */
export type DirectoryServices = ConsoleArgDeps & Pick<Services, 'directory'>;

const Target = z.object({ chainID: z.string().min(1), contractAddress: AddressArg });
const FeatureIndex = z.number().int().min(0).max(MAX_FEATURE_INDEX, `featureIndex is a uint8 (0 to ${MAX_FEATURE_INDEX})`);

/** Curating the token directory: the same operations as the Admin service, for the console page. */
export function directoryMethods({ s }: ConsoleDeps<DirectoryServices>): Record<string, MethodDef<any>> {
  return {
    /** Every entry, testnets included (the page shows the testnet flag), one page at a time. */
    ListDirectory: method({
      input: z.object({ chainID: z.string().optional(), page: z.number().int().min(0).default(0), pageSize: z.number().int().min(1).max(100).default(50) }),
      handler: async (a) => {
        const { contracts, more } = await s.directory.list({
          ...(a.chainID ? { chainId: chainIdArg(s, a.chainID) } : {}),
          includeTestnets: true,
          onlyFeatured: false,
          allowed: null,
          page: a.page,
          pageSize: a.pageSize,
        });
        return {
          entries: contracts.map((c) => ({ ...c, network: s.directory.networkName(c.chainId), testnet: s.directory.isTestnet(c.chainId) })),
          more,
        };
      },
    }),
    AddToDirectory: method({
      input: Target.extend({ featureIndex: FeatureIndex.optional() }),
      handler: async (a) => (await s.directory.add(chainIdArg(s, a.chainID), [a.contractAddress], a.featureIndex), {}),
    }),
    RemoveFromDirectory: method({
      input: Target,
      handler: async (a) => {
        if (!(await s.directory.remove(chainIdArg(s, a.chainID), a.contractAddress))) throw new RpcError(MetadataErrors.NotFound, 'the contract is not in the token directory');
        return {};
      },
    }),
    SetDirectoryFeatureIndex: method({
      input: Target.extend({ featureIndex: FeatureIndex }),
      handler: async (a) => {
        if (!(await s.directory.setFeatureIndex(chainIdArg(s, a.chainID), a.contractAddress, a.featureIndex))) {
          throw new RpcError(MetadataErrors.NotFound, 'the contract is not in the token directory: add it first');
        }
        return {};
      },
    }),
  };
}
