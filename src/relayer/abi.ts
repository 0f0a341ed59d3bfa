import { parseAbi } from 'viem';

/** The v2 wallet's Transaction tuple, as `execute` and the events hash it. */
export const TRANSACTION_TUPLE = '(bool delegateCall, bool revertOnError, uint256 gasLimit, address target, uint256 value, bytes data)';

export const walletAbi = parseAbi([
  `function execute(${TRANSACTION_TUPLE}[] _txs, uint256 _nonce, bytes _signature)`,
  `function selfExecute(${TRANSACTION_TUPLE}[] _txs)`,
  'function readNonce(uint256 _space) view returns (uint256)',
  'event TxExecuted(bytes32 indexed _tx, uint256 _index)',
  'event TxFailed(bytes32 indexed _tx, uint256 _index, bytes _reason)',
  'event NonceChange(uint256 _space, uint256 _newNonce)',
]);

export const factoryAbi = parseAbi(['function deploy(address _mainModule, bytes32 _salt) payable returns (address _contract)']);

/** The gas-estimation module (MainModuleGasEstimation) swapped in by state override for unsigned bundles. */
export const estimationAbi = parseAbi([`function simulateExecute(${TRANSACTION_TUPLE}[] _txs) returns ((bool executed, bool succeeded, bytes result, uint256 gasUsed)[])`]);

export const probeAbi = parseAbi([
  'function probe(address entry, bytes data, address payee, address[] tokens) returns (bool ok, bytes ret, uint256 gasUsed, uint256[] paid)',
  'struct Job { address entry; bytes data; uint256 gasCap; uint256 trialGas; }',
  'struct Result { bool ran; bool ok; bytes ret; uint256 gasUsed; uint256[] paid; uint8 trial; }',
  'function codeHashes(address[] accounts) view returns (bytes32[] out)',
  'function probeMany(Job[] jobs, address payee, address[] tokens, address[] nonceWallets, uint256[] nonceSpaces, uint256 trialBps) returns (uint256 blockNumber, uint256[] nonces, Result[] results)',
]);

export const erc20Abi = parseAbi(['function transfer(address to, uint256 amount) returns (bool)', 'function balanceOf(address owner) view returns (uint256)']);

/** Token-moving selectors, for the "sponsored token" rule. */
export const tokenMoveAbi = parseAbi([
  'function transfer(address to, uint256 amount) returns (bool)',
  'function transferFrom(address from, address to, uint256 amountOrId) returns (bool)',
  'function safeTransferFrom(address from, address to, uint256 id)',
  'function safeTransferFrom(address from, address to, uint256 id, bytes data)',
  'function safeTransferFrom(address from, address to, uint256 id, uint256 amount, bytes data)',
  'function safeBatchTransferFrom(address from, address to, uint256[] ids, uint256[] amounts, bytes data)',
]);

/** Custom errors of the v2 wallet contracts, to name why a bundle reverts. */
export const walletErrorsAbi = parseAbi([
  'error BadNonce(uint256 _space, uint256 _provided, uint256 _current)',
  'error CallReverted(uint256 _index, bytes _result)',
  'error DelegateCallNotAllowed(uint256 _index)',
  'error DelegateCallRefused(uint256 _index)',
  'error DeployFailed(address _mainModule, bytes32 _salt)',
  'error EmptySignature()',
  'error ImageHashIsZero()',
  'error InvalidNestedSignature(bytes32 _hash, address _addr, bytes _signature)',
  'error InvalidSValue(bytes _signature, bytes32 _s)',
  'error InvalidSignature(bytes32 _hash, bytes _signature)',
  'error InvalidSignatureFlag(uint256 _flag)',
  'error InvalidSignatureLength(bytes _signature)',
  'error InvalidSignatureType(bytes1 _type)',
  'error InvalidVValue(bytes _signature, uint256 _v)',
  'error LowWeightChainedSignature(bytes _signature, uint256 threshold, uint256 _weight)',
  'error NotEnoughGas(uint256 _index, uint256 _requested, uint256 _available)',
  'error OnlyDelegatecall()',
  'error OnlySelfAuth(address _sender, address _self)',
  'error SignerIsAddress0(bytes _signature)',
  'error UnsupportedSignatureType(bytes _signature, uint256 _type, bool _recoverMode)',
  'error WrongChainedCheckpointOrder(uint256 _current, uint256 _prev)',
]);

export const EXECUTE_SELECTOR = '0x7a9a1628';
export const DEPLOY_SELECTOR = '0x32c02a14';
