"""Units: model parsing, deployment files, revert decoding, transient-error classification."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests
from eth_abi import encode
from eth_utils import function_signature_to_4byte_selector
from web3.exceptions import ContractLogicError

from intellect.sdk import (
    CONTRACT_NAMES,
    ConfigError,
    Cursor,
    ErrorDecoder,
    PoolParams,
    RetryPolicy,
    Role,
    SchemaVersionError,
    TransientRpcError,
    format_tokens,
    is_transient,
    load_abi,
    load_deployment,
    parse_tokens,
    resolve_network,
    with_retries,
)

ADDR = "0x" + "ab" * 20


def _decoder() -> ErrorDecoder:
    return ErrorDecoder(load_abi(n) for n in CONTRACT_NAMES)


def test_error_decoder_custom_error_with_args() -> None:
    sel = function_signature_to_4byte_selector("StakeManagerInsufficientStake(address,uint256,uint256)")
    data = "0x" + (sel + encode(["address", "uint256", "uint256"], [ADDR, 5, 7])).hex()
    err = _decoder().decode(data, function="requestUnstake", contract="StakeManager")
    assert err.name == "StakeManagerInsufficientStake"
    assert {k: v for k, v in err.error_args.items() if k != "node"} == {"active": 5, "requested": 7}
    assert err.error_args["node"].lower() == ADDR
    assert str(err).startswith("StakeManager.requestUnstake reverted: StakeManagerInsufficientStake(")


def test_error_decoder_string_uses_tuple_and_openzeppelin_errors() -> None:
    sel = function_signature_to_4byte_selector("NodeRegistryStringTooLong(string,uint256,uint256)")
    data = sel + encode(["string", "uint256", "uint256"], ["endpoint", 300, 256])
    assert _decoder().decode(data).error_args == {"field": "endpoint", "length": 300, "maxLength": 256}
    sel = function_signature_to_4byte_selector("ERC20InsufficientBalance(address,uint256,uint256)")
    e = _decoder().decode(sel + encode(["address", "uint256", "uint256"], [ADDR, 1, 2]))
    assert e.name == "ERC20InsufficientBalance"


def test_error_decoder_error_panic_unknown_and_empty() -> None:
    d = _decoder()
    e = d.decode(bytes.fromhex("08c379a0") + encode(["string"], ["boom"]))
    assert (e.name, e.error_args) == ("Error", {"message": "boom"})
    assert d.decode(bytes.fromhex("4e487b71") + encode(["uint256"], [0x11])).error_args == {"code": 0x11}
    assert d.decode("0xdeadbeef").name == "unknown"
    assert d.decode(None, message="execution reverted: nope").error_args == {"reason": "nope"}
    garbled = function_signature_to_4byte_selector("TaskLedgerUnknownPool(uint32)") + b"\x01"
    assert "undecodable" in d.decode(garbled).error_args
    exc = ContractLogicError("execution reverted", data="0x" + function_signature_to_4byte_selector(
        "TaskLedgerEmptyBatch()").hex())
    assert d.from_exception(exc).name == "TaskLedgerEmptyBatch"


def test_is_transient_classification() -> None:
    assert is_transient(requests.ConnectionError())
    assert is_transient(requests.Timeout())
    r = requests.Response()
    r.status_code = 429
    assert is_transient(requests.HTTPError(response=r))
    r.status_code = 400
    assert not is_transient(requests.HTTPError(response=r))
    assert not is_transient(ContractLogicError("execution reverted"))
    assert not is_transient(ValueError("x"))


def test_with_retries_retries_transient_only() -> None:
    calls = []

    def flaky() -> int:
        calls.append(1)
        if len(calls) < 3:
            raise requests.ConnectionError("refused")
        return 42

    assert with_retries(flaky, RetryPolicy(5, 0.001, 0.002), "x") == 42 and len(calls) == 3
    calls.clear()

    def reverts() -> None:
        calls.append(1)
        raise ContractLogicError("execution reverted")

    with pytest.raises(ContractLogicError):
        with_retries(reverts, RetryPolicy(5, 0.001, 0.002), "x")
    assert len(calls) == 1
    with pytest.raises(TransientRpcError):
        with_retries(lambda: (_ for _ in ()).throw(requests.Timeout()), RetryPolicy(2, 0.001, 0.002), "x")


def _deployment_dict(**over: object) -> dict[str, object]:
    d: dict[str, object] = {
        "schema": "intellect.deployment/v1", "chainId": 31337, "network": "development", "blockNumber": 7,
        "deployer": ADDR, "contracts": {n: {"address": ADDR, "abiSha256": "0" * 64, "blockNumber": 7, "txHash": "0x"}
                                        for n in CONTRACT_NAMES},
        "parameters": {}, "defaultPoolId": 1,
    }
    d.update(over)
    return d


def test_load_deployment_parses_deploy_script_format(tmp_path: Path) -> None:
    f = tmp_path / "31337.json"
    f.write_text(json.dumps(_deployment_dict()))
    dep = load_deployment(31337, f)
    assert dep.block == 7 and dep.default_pool_id == 1 and dep.address("TaskLedger") == ADDR
    with pytest.raises(ConfigError, match="chain 31337"):
        load_deployment(8453, f)


def test_load_deployment_refuses_bad_files(tmp_path: Path) -> None:
    f = tmp_path / "d.json"
    f.write_text(json.dumps(_deployment_dict(schema="intellect.deployment/v2")))
    with pytest.raises(SchemaVersionError, match="v2"):
        load_deployment(path=f)
    f.write_text(json.dumps(_deployment_dict(contracts={"IntellectToken": ADDR})))
    with pytest.raises(ConfigError, match="NodeRegistry"):
        load_deployment(path=f)
    f.write_text("{not json")
    with pytest.raises(ConfigError, match="not JSON"):
        load_deployment(path=f)
    with pytest.raises(ConfigError, match="brownie run deploy"):
        load_deployment(path=tmp_path / "missing.json")


def test_tokens_roles_params_and_networks() -> None:
    assert parse_tokens("12.5") == 12_500_000_000_000_000_000
    assert parse_tokens("1000wei") == 1000 and parse_tokens("0.000000000000000001") == 1
    assert format_tokens(12_500_000_000_000_000_000) == "12.5" and format_tokens(10**18) == "1"
    for bad in ("", "1.2.3", "-1", "abc", "0.0000000000000000001"):
        with pytest.raises(ValueError):
            parse_tokens(bad)
    assert Role.parse("Validator") is Role.VALIDATOR and Role.parse(4) is Role.RELAY
    with pytest.raises(ValueError, match="unknown role"):
        Role.parse("miner")
    pp = PoolParams(trainer=ADDR, rules_cid="bafk", reward_per_unit=1, challenge_bond=2, slash_amount=3)
    assert PoolParams.from_tuple(pp.as_tuple()) == pp
    assert resolve_network("local")[1] == "http://127.0.0.1:8545"
    assert resolve_network("http://x:1") == (None, "http://x:1")
    with pytest.raises(ConfigError, match="needs an RPC URL"):
        resolve_network("base-sepolia")
    spec, url = resolve_network("base-sepolia", "https://sepolia.base.org")
    assert spec is not None and spec.chain_id == 84532 and url == "https://sepolia.base.org"


def test_cursor_json_roundtrip() -> None:
    c = Cursor(chain_id=1, block=5, log_index=3, hashes={4: "0xaa", 5: "0xbb"})
    back = Cursor.model_validate_json(c.model_dump_json(by_alias=True))
    assert back == c and json.loads(c.model_dump_json(by_alias=True))["schema"] == "intellect.cursor/v1"
