"""The network's one name (issue 36): a signed `intellect.network/v1` descriptor, checked offline (schema, size,
signature, signer = deployer) and on the chain it names (chain id, signer = the token's admin), fetched from a path
or over real HTTP (a gateway's /ipfs/<cid> URL checked against its CID), and the RPC URLs tried in order."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_runner import run_cli
from page_server import serve_pages  # type: ignore[import-not-found]

from intellect.sdk import Protocol, RetryPolicy, RpcError, SchemaVersionError, dev_account
from intellect.sdk.cli import EXIT_USER
from intellect.sdk.devnet import Devnet
from intellect.sdk.ipfs import compute_cid
from intellect.sdk.network import (
    MAX_DESCRIPTOR_BYTES,
    NetworkDescriptor,
    NetworkDescriptorError,
    load_network,
    parse_network,
    sign_network,
    write_network,
)


def _signed(net: Devnet, **kw: object) -> NetworkDescriptor:
    args = {"name": "test-net", "rpc_urls": [net.url], "account": dev_account(0), **kw}
    return sign_network(net.deployment, **args)  # type: ignore[arg-type]


@pytest.fixture
def served() -> Iterator[tuple[str, dict[str, bytes]]]:
    """A plain HTTP server on loopback serving the bytes of `pages[path]` (404 otherwise)."""
    pages: dict[str, bytes] = {}
    with serve_pages("127.0.0.1", pages) as base:
        yield base, pages


def test_descriptor_round_trips_and_connects_from_its_path_alone(net: Devnet, tmp_path: Path) -> None:
    path = write_network(_signed(net), tmp_path / "network.json")
    desc = load_network(path)
    assert desc.signer == dev_account(0).address == net.deployment.deployer
    p = Protocol.connect(descriptor=str(path), dev_account_index=3)  # no network name, RPC URL or deployment file
    assert p.chain_id == 31337 and p.rpc_url == net.url
    assert p.deployment.address("TaskLedger") == net.deployment.address("TaskLedger")
    assert p.pool(net.deployment.default_pool_id).budget > 0


def test_rpc_urls_are_tried_in_order_past_a_dead_one(net: Devnet, tmp_path: Path) -> None:
    dead = "http://127.0.0.1:9"  # discard port: nothing listens
    desc = parse_network(_signed(net, rpc_urls=[dead, net.url]).to_bytes(), "test")
    assert Protocol.connect(descriptor=desc).rpc_url == net.url
    only_dead = _signed(net, rpc_urls=[dead])
    with pytest.raises(RpcError, match=re.escape("connect to http://127.0.0.1:9")):
        Protocol.connect(descriptor=only_dead, retry=RetryPolicy(attempts=1))


def test_an_altered_descriptor_is_refused_by_its_signature(net: Devnet) -> None:
    doc = json.loads(_signed(net).to_bytes())
    doc["rpcUrls"] = ["http://attacker.example:8545"]
    with pytest.raises(NetworkDescriptorError, match=r"signature is not 0x\w+'s \(the document was altered or signed by another key\)"):
        parse_network(json.dumps(doc).encode(), "mirror")
    doc = json.loads(_signed(net).to_bytes())
    doc["signature"] = ""
    with pytest.raises(NetworkDescriptorError, match="is not signed"):
        parse_network(json.dumps(doc).encode(), "mirror")


def test_a_descriptor_signed_by_anyone_but_the_tokens_admin_is_refused_on_chain(net: Devnet) -> None:
    stranger = dev_account(3)
    with pytest.raises(NetworkDescriptorError, match="must be signed by the deployer"):
        _signed(net, account=stranger)
    with pytest.raises(NetworkDescriptorError, match="names no deployer"):
        sign_network(net.deployment.model_copy(update={"deployer": ""}), name="x", rpc_urls=[net.url],
                     account=dev_account(0))
    # the stranger rewrites the deployer field to itself: self-consistent offline, refused by the chain
    forged_dep = net.deployment.model_copy(update={"deployer": stranger.address})
    forged = sign_network(forged_dep, name="forged", rpc_urls=[net.url], account=stranger)
    assert parse_network(forged.to_bytes(), "forged").signer == stranger.address
    with pytest.raises(NetworkDescriptorError, match="not the admin of its token on chain 31337: refused"):
        Protocol.connect(descriptor=forged)
    # signed by the deployer but its signer field names another key: the signature check names it
    doc = json.loads(_signed(net).to_bytes())
    doc["signer"] = stranger.address
    with pytest.raises(NetworkDescriptorError, match="signature is not"):
        parse_network(json.dumps(doc).encode(), "x")


@pytest.mark.parametrize(("data", "error", "match"), [
    (b"\xff\xfe", NetworkDescriptorError, "is not JSON"),
    (b"[1, 2]", NetworkDescriptorError, "not a JSON object"),
    (b'{"schema": "intellect.network/v2"}', SchemaVersionError, "intellect.network/v2.*not supported"),
    (b'{"schema": "intellect.network/v1", "name": "x"}', NetworkDescriptorError, "is invalid: chainId"),
    (b"[" * 100_000, NetworkDescriptorError, "not JSON|nested too deeply"),
    (b" " * (MAX_DESCRIPTOR_BYTES + 1), NetworkDescriptorError, f"over {MAX_DESCRIPTOR_BYTES}"),
], ids=["not-utf8", "not-object", "schema-v2", "fields-missing", "deep", "too-big"])
def test_malformed_descriptors_are_refused_by_name(data: bytes, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        parse_network(data, "stranger")


def test_a_descriptor_with_an_unknown_field_or_a_bad_url_is_refused(net: Devnet) -> None:
    doc = json.loads(_signed(net).to_bytes())
    with pytest.raises(NetworkDescriptorError, match="is invalid: bootstrap: Extra inputs are not permitted"):
        parse_network(json.dumps({**doc, "bootstrap": ["x"]}).encode(), "x")
    with pytest.raises(NetworkDescriptorError, match="rpcUrls"):
        _signed(net, rpc_urls=["file:///etc/passwd"])


def test_fetched_over_http_and_checked_against_the_cid_of_a_gateway_url(net: Devnet, served) -> None:
    base, pages = served
    data = _signed(net).to_bytes()
    cid = compute_cid(data)
    pages["/network.json"] = data
    pages[f"/ipfs/{cid}"] = data
    assert load_network(f"{base}/network.json").name == "test-net"
    assert load_network(f"{base}/ipfs/{cid}").name == "test-net"
    other = _signed(net, name="other-net").to_bytes()  # validly signed, but not the CID asked for
    pages[f"/ipfs/{cid}"] = other
    with pytest.raises(NetworkDescriptorError, match=f"served other bytes than CID {cid}"):
        load_network(f"{base}/ipfs/{cid}")
    with pytest.raises(NetworkDescriptorError, match="HTTP 404"):
        load_network(f"{base}/missing.json")
    pages["/huge.json"] = b" " * (MAX_DESCRIPTOR_BYTES + 1)
    with pytest.raises(NetworkDescriptorError, match="could not be fetched"):
        load_network(f"{base}/huge.json")
    with pytest.raises(NetworkDescriptorError, match="cannot be read"):
        load_network("/nonexistent/network.json")


def test_cli_signs_shows_and_joins_by_the_descriptor(net: Devnet, tmp_path: Path, served) -> None:
    base, pages = served
    out = tmp_path / "net.json"
    chain = ["--network", net.url, "--deployment", str(net.deployment_file)]
    code, stdout, err = run_cli([*chain, "--dev-account", "3", "network", "sign", "--name", "n",
                                 "--public-rpc-url", net.url, "--out", str(out)])
    assert code == EXIT_USER and "must be signed by the deployer" in err and not out.exists()
    code, stdout, err = run_cli([*chain, "--dev-account", "0", "--json", "network", "sign", "--name", "lab-net",
                                 "--public-rpc-url", net.url, "--out", str(out)])
    assert code == 0, err
    signed = json.loads(stdout)
    assert signed["cid"] == compute_cid(out.read_bytes()) and signed["signer"] == dev_account(0).address
    pages["/lab-net.json"] = out.read_bytes()
    url = f"{base}/lab-net.json"
    code, stdout, err = run_cli(["--json", "network", "show", url])
    assert code == 0, err
    shown = json.loads(stdout)
    assert shown["name"] == "lab-net" and shown["rpc_url"] == net.url
    assert shown["contracts"]["TaskLedger"] == net.deployment.address("TaskLedger")
    # a joiner with the one URL: faucet and register, no network name, RPC URL or deployment file
    code, stdout, err = run_cli(["--descriptor", url, "--dev-account", "6", "faucet"])
    assert code == 0 and "dripped" in stdout, err
    code, stdout, err = run_cli(["--descriptor", url, "--dev-account", "6", "--json", "node", "register", "--role",
                                 "worker", "--endpoint", "http://w6"])
    assert code == 0, err
    p = net.protocol(0)
    assert p.node(dev_account(6).address).role == 1
    code, stdout, err = run_cli(["--descriptor", f"{base}/missing.json", "node", "show"])
    assert code == EXIT_USER and err.startswith("error: network descriptor") and "HTTP 404" in err
