// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

/// The relayer's simulator. It is never deployed: the relayer places its runtime code at a fixed
/// address with an eth_call state override, then calls the meta-transaction's entrypoint through it
/// to learn, in one round trip, whether the bundle executes, the gas it burns on the generous path
/// and how much each fee token the payment address really receives.
contract RelayProbe {
    function probe(address entry, bytes calldata data, address payee, address[] calldata tokens)
        external
        returns (bool ok, bytes memory ret, uint256 gasUsed, uint256[] memory paid)
    {
        uint256[] memory before = _balances(payee, tokens);
        uint256 start = gasleft();
        (ok, ret) = entry.call(data);
        gasUsed = start - gasleft();
        uint256[] memory later = _balances(payee, tokens);
        paid = new uint256[](tokens.length);
        for (uint256 i = 0; i < tokens.length; i++) {
            paid[i] = later[i] > before[i] ? later[i] - before[i] : 0;
        }
    }

    /// address(0) stands for the chain's native token.
    function _balances(address owner, address[] calldata tokens) private view returns (uint256[] memory out) {
        out = new uint256[](tokens.length);
        for (uint256 i = 0; i < tokens.length; i++) {
            if (tokens[i] == address(0)) {
                out[i] = owner.balance;
                continue;
            }
            (bool ok, bytes memory ret) = tokens[i].staticcall(abi.encodeWithSelector(0x70a08231, owner));
            if (ok && ret.length >= 32) out[i] = abi.decode(ret, (uint256));
        }
    }
}
