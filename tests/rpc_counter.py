"""Counts the JSON-RPC requests a web3 instance sends (a web3 v7 middleware), for tests that bound what a call
or an agent pass costs: `with count_rpc(protocol.w3) as calls: ...; calls.count("eth_call")`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from web3 import Web3
from web3.middleware import Web3Middleware


@contextmanager
def _recording(w3: Web3, name: str, record: Callable[[str, Any], None]) -> Iterator[None]:
    """A web3 middleware calling `record(method, params)` for every request `w3` sends inside the block."""

    class _Recording(Web3Middleware):
        def wrap_make_request(self, make_request: Callable[..., Any]) -> Callable[..., Any]:
            def recorded(method: str, params: Any) -> Any:
                record(str(method), params)
                return make_request(method, params)

            return recorded

    w3.middleware_onion.add(_Recording, name=name)
    try:
        yield
    finally:
        w3.middleware_onion.remove(name)


@contextmanager
def count_rpc(w3: Web3) -> Iterator[list[str]]:
    """The methods of every request `w3` sends inside the block, in order (the list fills as they go)."""
    methods: list[str] = []
    with _recording(w3, "rpc-counter", lambda method, _params: methods.append(method)):
        yield methods


@contextmanager
def log_ranges(w3: Web3) -> Iterator[list[tuple[int, int]]]:
    """The (fromBlock, toBlock) of every eth_getLogs request `w3` sends inside the block, in order: what a
    pass scans of the chain's log, whatever the chunking (anvil's few blocks fit one request either way)."""
    ranges: list[tuple[int, int]] = []

    def record(method: str, params: Any) -> None:
        if method == "eth_getLogs":
            ranges.append((_block(params[0]["fromBlock"]), _block(params[0]["toBlock"])))

    with _recording(w3, "rpc-log-ranges", record):
        yield ranges


def _block(b: Any) -> int:
    return int(b, 16) if isinstance(b, str) else int(b)
