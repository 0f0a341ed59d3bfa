import { getAddress, type Address, type Hex } from 'viem';

export interface SequenceContext {
  factory: Address;
  mainModule: Address;
  mainModuleUpgradable: Address;
  guestModule: Address;
  utils: Address;
}

/** The Sequence v2 wallet contracts at their production addresses (the same on every chain). */
export const SEQUENCE_V2_CONTEXT: Readonly<SequenceContext> = Object.freeze({
  factory: getAddress('0xFaA5c0b14d1bED5C888Ca655B9a8A5911F78eF4A'),
  mainModule: getAddress('0xfBf8f1A5E00034762D928f46d438B947f5d4065d'),
  mainModuleUpgradable: getAddress('0x4222dcA3974E39A8b41c411FeDDE9b09Ae14b911'),
  guestModule: getAddress('0xfea230Ee243f88BC698dD8f1aE93F8301B6cdfaE'),
  utils: getAddress('0xdbbFa3cB3B087B64F4ef5E3D20Dda2488AA244e6'),
});

/** The wallet proxy's creation code; a wallet's address is CREATE2(factory, imageHash, this ‖ mainModule). */
export const WALLET_CREATION_CODE: Hex = '0x603a600e3d39601a805130553df3363d3d373d3d3d363d30545af43d82803e903d91601857fd5bf3';
