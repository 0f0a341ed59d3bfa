// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

/// The relayer's simulator. It is never deployed: the relayer places its runtime code at a fresh
/// address with an eth_call state override, then calls meta-transactions' entrypoints through it to
/// learn, in one round trip, whether each bundle executes, the gas it burns on the generous path, how
/// much each fee token the payment address really receives, and whether a given gas limit is enough.
contract RelayProbe {
    struct Job {
        address entry;
        bytes data;
        /// The most gas the bundle may burn (the relayer's limit for it).
        uint256 gasCap;
        /// Gas to try the bundle again with (what its transaction gives the entrypoint); 0: gasUsed * trialBps / 10000.
        uint256 trialGas;
    }

    struct Result {
        /// False when the job could not be judged in this call (too little gas left): ask again alone.
        bool ran;
        bool ok;
        bytes ret;
        uint256 gasUsed;
        uint256[] paid;
        /// 0 not tried, 1 the bundle also executes with the trial gas, 2 it does not.
        uint8 trial;
    }

    /// Gas kept back in a job's frame for reading balances and encoding its result.
    uint256 private constant FRAME_RESERVE = 150_000;
    /// Below this, the remaining jobs are left for another call.
    uint256 private constant MIN_LEFT = 400_000;

    /// One bundle, as before: kept for callers that probe a single call.
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

    /// Many independent bundles in one call. Every read and every run happens in a frame of its own that
    /// reverts, so no job sees another's state changes, and none runs with accounts or slots warmed by
    /// the probe (EIP-2929 access lists are rolled back with the frame): each burns what its own
    /// transaction would. `nonceWallets`/`nonceSpaces` are wallet nonces read at the same state.
    function probeMany(
        Job[] calldata jobs,
        address payee,
        address[] calldata tokens,
        address[] calldata nonceWallets,
        uint256[] calldata nonceSpaces,
        uint256 trialBps
    ) external returns (uint256 blockNumber, uint256[] memory nonces, Result[] memory results) {
        blockNumber = block.number;
        uint256[] memory before;
        {
            (, bytes memory r) = address(this).call(abi.encodeCall(this.peek, (payee, tokens, nonceWallets, nonceSpaces)));
            (nonces, before) = abi.decode(r, (uint256[], uint256[]));
        }
        results = new Result[](jobs.length);
        for (uint256 i = 0; i < jobs.length; i++) {
            if (gasleft() < MIN_LEFT) break;
            results[i] = _judge(jobs[i], payee, tokens, before);
            if (results[i].ok) results[i].trial = _trial(jobs[i], results[i].gasUsed, trialBps);
        }
    }

    function _judge(Job calldata job, address payee, address[] calldata tokens, uint256[] memory before) private returns (Result memory res) {
        (, bytes memory r) = address(this).call{gas: gasleft() - 50_000}(abi.encodeCall(this.runOne, (job, payee, tokens)));
        if (r.length < 32) return res; // the frame itself ran out of gas: not judged
        bool full;
        uint256[] memory later;
        (res.ok, res.ret, res.gasUsed, later, full) = abi.decode(r, (bool, bytes, uint256, uint256[], bool));
        res.ran = res.ok || full;
        res.paid = new uint256[](tokens.length);
        for (uint256 t = 0; t < tokens.length; t++) res.paid[t] = later[t] > before[t] ? later[t] - before[t] : 0;
    }

    function _trial(Job calldata job, uint256 gasUsed, uint256 trialBps) private returns (uint8) {
        uint256 gas = job.trialGas != 0 ? job.trialGas : (gasUsed * trialBps) / 10_000;
        uint256 room = gasleft();
        if (room < 100_000 || gas > ((room - 100_000) * 63) / 64) return 0; // not tried
        (, bytes memory r) = address(this).call(abi.encodeCall(this.tryOne, (job.entry, job.data, gas)));
        if (r.length != 32) return 0;
        return abi.decode(r, (bool)) ? 1 : 2;
    }

    /// Reverts with (nonces, balances): read in a frame that reverts, so nothing it touches stays warm.
    function peek(address payee, address[] calldata tokens, address[] calldata wallets, uint256[] calldata spaces) external view {
        uint256[] memory nonces = new uint256[](wallets.length);
        for (uint256 i = 0; i < wallets.length; i++) {
            (bool ok, bytes memory ret) = wallets[i].staticcall(abi.encodeWithSelector(0x8c3f5563, spaces[i]));
            if (ok && ret.length >= 32) nonces[i] = abi.decode(ret, (uint256));
        }
        bytes memory out = abi.encode(nonces, _balances(payee, tokens));
        assembly {
            revert(add(out, 32), mload(out))
        }
    }

    /// Reverts with (ok, ret, gasUsed, balances after, whether the bundle had its whole gasCap).
    function runOne(Job calldata job, address payee, address[] calldata tokens) external {
        (uint256 g, bool full) = _gasFor(job.gasCap);
        (bool ok, bytes memory ret, uint256 used) = _run(job.entry, job.data, g);
        bytes memory out = abi.encode(ok, ret, used, _balances(payee, tokens), full);
        assembly {
            revert(add(out, 32), mload(out))
        }
    }

    /// The bundle's gas: its cap, or what this frame can give (then a failure is not conclusive).
    function _gasFor(uint256 cap) private view returns (uint256 g, bool full) {
        uint256 room = gasleft();
        room = room > FRAME_RESERVE ? room - FRAME_RESERVE : 0;
        room -= room / 64;
        return cap > room ? (room, false) : (cap, true);
    }

    function _run(address entry, bytes calldata data, uint256 g) private returns (bool ok, bytes memory ret, uint256 used) {
        uint256 start = gasleft();
        (ok, ret) = entry.call{gas: g}(data);
        used = start - gasleft();
    }

    /// Reverts with whether the bundle executes when its entrypoint is given exactly `gas`.
    function tryOne(address entry, bytes calldata data, uint256 gas) external {
        (bool ok, ) = entry.call{gas: gas}(data);
        bytes memory out = abi.encode(ok);
        assembly {
            revert(add(out, 32), mload(out))
        }
    }

    /// Code hashes of many accounts in one call (0 for an account without code): recognising wallets
    /// without an eth_getCode per address.
    function codeHashes(address[] calldata accounts) external view returns (bytes32[] memory out) {
        out = new bytes32[](accounts.length);
        for (uint256 i = 0; i < accounts.length; i++) {
            address a = accounts[i];
            if (a.code.length > 0) out[i] = a.codehash;
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
