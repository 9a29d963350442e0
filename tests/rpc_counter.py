"""Counts the JSON-RPC requests a web3 instance sends (a web3 v7 middleware), for tests that bound what a call
or an agent pass costs: `with count_rpc(protocol.w3) as calls: ...; calls.count("eth_call")`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from web3 import Web3
from web3.middleware import Web3Middleware


@contextmanager
def count_rpc(w3: Web3) -> Iterator[list[str]]:
    """The methods of every request `w3` sends inside the block, in order (the list fills as they go)."""
    methods: list[str] = []

    class _Counting(Web3Middleware):
        def wrap_make_request(self, make_request: Callable[..., Any]) -> Callable[..., Any]:
            def counted(method: str, params: Any) -> Any:
                methods.append(str(method))
                return make_request(method, params)

            return counted

    w3.middleware_onion.add(_Counting, name="rpc-counter")
    try:
        yield methods
    finally:
        w3.middleware_onion.remove("rpc-counter")


@contextmanager
def log_ranges(w3: Web3) -> Iterator[list[tuple[int, int]]]:
    """The (fromBlock, toBlock) of every eth_getLogs request `w3` sends inside the block, in order: what a
    pass scans of the chain's log, whatever the chunking (anvil's few blocks fit one request either way)."""
    ranges: list[tuple[int, int]] = []

    class _Ranges(Web3Middleware):
        def wrap_make_request(self, make_request: Callable[..., Any]) -> Callable[..., Any]:
            def recorded(method: str, params: Any) -> Any:
                if method == "eth_getLogs":
                    p = params[0]
                    ranges.append((_block(p["fromBlock"]), _block(p["toBlock"])))
                return make_request(method, params)

            return recorded

    w3.middleware_onion.add(_Ranges, name="rpc-log-ranges")
    try:
        yield ranges
    finally:
        w3.middleware_onion.remove("rpc-log-ranges")


def _block(b: Any) -> int:
    return int(b, 16) if isinstance(b, str) else int(b)
