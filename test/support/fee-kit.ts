// What the relayer's money-path tests do over and over: a key header, a fresh wallet, fee tokens
// minted to it, and the fee token's balance read on chain.
import type { Address } from 'viem';
import { erc20, type RelayerEnv } from './relayer-env.ts';
import { newSigner, walletFor } from './sequence-wallet.ts';

export function feeKit(env: () => RelayerEnv) {
  return {
    key: () => ({ 'x-access-key': env().accessKey }),
    /** A fresh 1-of-1 wallet (not deployed) and its signer's key. */
    user: () => {
      const s = newSigner();
      return { key: s.privateKey, wallet: walletFor(s.address) };
    },
    mint: (to: Address, amount: bigint) => env().chain.send([{ address: env().token, contract: 'DevERC20', functionName: 'mint', args: [to, amount] }]),
    balance: (owner: Address) => env().public.readContract({ address: env().token, abi: erc20, functionName: 'balanceOf', args: [owner] }),
  };
}
