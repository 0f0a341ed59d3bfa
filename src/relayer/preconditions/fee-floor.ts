import type { Address, PublicClient } from 'viem';
import { erc20Abi } from '../abi.ts';
import { RelayError } from '../errors.ts';
import { feeTotals, gasCost, tokenKey, weiToToken, type FeePayment, type FeeTokenConfig, type PriceSource } from '../intake/fees.ts';

export interface FeeFloorDeps {
  client: Pick<PublicClient, 'getBalance' | 'readContract'>;
  prices: PriceSource;
  chainId: number;
  feeTokens: readonly FeeTokenConfig[];
  feeMarkup: number;
}

/**
 * A fee-paying meta-transaction that waits on preconditions is sized and priced only once they hold, but
 * it takes a place in the (small, read every block) precondition pool now. So at acceptance its fee must
 * already be a real one — at least what the smallest bundle (`minGas`: its calldata, one fee transfer)
 * costs at the current price — and its payer must hold it now. Otherwise a few addresses could fill the
 * pool for an hour with bundles that pay 1 base unit from empty wallets (issue 29).
 */
export async function checkWaitingFee(d: FeeFloorDeps, payer: Address, payments: readonly FeePayment[], minGas: bigint, gasPrice: bigint): Promise<void> {
  const totals = feeTotals(payments);
  const wei = gasCost(minGas, gasPrice, d.feeMarkup);
  const board = await d.prices.prices(d.chainId, d.feeTokens);
  const why: string[] = [];
  for (const t of d.feeTokens) {
    const paid = totals.get(tokenKey(t)) ?? 0n;
    if (paid === 0n) continue;
    const p = board.get(tokenKey(t));
    if (!p?.ok) {
      why.push(`${t.symbol} has no trustworthy price now (${p?.reason ?? 'no price'})`);
      continue;
    }
    const floor = weiToToken(wei, t, p.price);
    if (paid < floor) {
      why.push(`${t.symbol}: paid ${paid}, and even the smallest bundle costs ${floor} now`);
      continue;
    }
    const held = t.address ? await d.client.readContract({ address: t.address as Address, abi: erc20Abi, functionName: 'balanceOf', args: [payer] }) : await d.client.getBalance({ address: payer });
    if ((held as bigint) < paid) {
      why.push(`${t.symbol}: wallet ${payer} holds ${held}, less than the fee of ${paid}`);
      continue;
    }
    return;
  }
  throw new RelayError('insufficientFee', `a meta-transaction that waits on preconditions must pay a fee it can pay now: ${why.join('; ')}`);
}
