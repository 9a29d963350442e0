"""What every role agent shares: chain connection, node registration and stake, local IPFS and
its gateway, the HTTP face, crash-safe state, peer discovery, logging and graceful shutdown.

    agent = Worker(cfg)      # a subclass of Agent
    agent.run()              # blocks until SIGTERM/SIGINT or the role's work is done

Peers are found through the chain: every agent registers its node with its AgentServer URL as
the endpoint, and serves `/status` naming its other services (IPFS gateway, Shardcast). Nothing
else is configured by hand on a local swarm.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

from intellect.agents._server import AgentServer, Metrics
from intellect.agents._state import StateStore
from intellect.agents.config import AgentConfig, TaskSettings

__all__ = [
    "STATUS_SCHEMA",
    "Agent",
    "AgentError",
    "Directory",
    "JsonFormatter",
    "StateCursorStore",
    "hardware_class",
    "load_task_set",
    "setup_logging",
    "thinking_budgets",
]

log = logging.getLogger(__name__)

STATUS_SCHEMA = "intellect.agent.status/v1"


class AgentError(RuntimeError):
    """The agent cannot start or continue (the message says what to fix)."""


# ---------------------------------------------------------------------------------------------
# logging


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg (+ exc)."""

    def __init__(self, role: str = "", node: str = "") -> None:
        super().__init__()
        self.role = role
        self.node = node

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if self.role:
            doc["role"] = self.role
        if self.node:
            doc["node"] = self.node
        for key in ("event", "submission", "step", "task"):
            if hasattr(record, key):
                doc[key] = getattr(record, key)
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str)


def setup_logging(level: str = "INFO", json_lines: bool = False, role: str = "") -> None:
    handler = logging.StreamHandler()
    if json_lines:
        handler.setFormatter(JsonFormatter(role=role))
    else:
        handler.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)s {role} %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("urllib3", "web3", "filelock", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


# ---------------------------------------------------------------------------------------------
# event cursor in the state store


class StateCursorStore:
    """`intellect.sdk.EventStream` cursor kept in the agent's SQLite state (one key per stream)."""

    def __init__(self, store: StateStore, key: str) -> None:
        self.store = store
        self.key = f"cursor:{key}"

    def load(self) -> Any:
        from intellect.sdk import Cursor

        raw = self.store.get(self.key)
        return None if raw is None else Cursor.model_validate(raw)

    def save(self, cursor: Any) -> None:
        self.store.set(self.key, json.loads(cursor.model_dump_json()))


# ---------------------------------------------------------------------------------------------
# hardware classes and thinking budgets


def hardware_class(gpu_model: str, vram_gib: int, gpu_count: int) -> str:
    """`cpu` (no GPU), `gpu-small` (< 40 GiB per GPU), `gpu-large` (≥ 40 GiB: A100-40/80, H100, H200)."""
    if gpu_count <= 0 or gpu_model.strip().lower() in ("", "cpu", "none"):
        return "cpu"
    return "gpu-large" if vram_gib >= 40 else "gpu-small"


def thinking_budgets(settings: TaskSettings, gpu_model: str, vram_gib: int, gpu_count: int) -> list[int]:
    """The target lengths a node of this declared hardware class is assigned (INTELLECT-2: slow
    nodes get short thinking budgets). Validators recompute this from the node's on-chain record."""
    cls = hardware_class(gpu_model, vram_gib, gpu_count)
    budgets = settings.budgets.get(cls) or settings.budgets.get("cpu")
    if not budgets:
        raise AgentError(f"tasks.budgets has no entry for hardware class {cls!r} (nor 'cpu')")
    return [int(b) for b in budgets]


# ---------------------------------------------------------------------------------------------
# task sets


def load_task_set(settings: TaskSettings, pool_task_set_cid: str | None, ipfs: Any) -> Any:
    """The pool's task set: from `tasks.source` (checked against the pool's CID when the pool names
    a real one) or fetched from IPFS by the pool's CID."""
    from intellect.sdk.ipfs import compute_cid
    from intellect.verifier.tasks import TaskSet

    empty = compute_cid(b"")
    src = settings.source
    if src == "pool":
        if not pool_task_set_cid or pool_task_set_cid == empty:
            raise AgentError("the pool names no task set (empty CID): set tasks.source to synthetic:N:SEED or a path")
        return TaskSet.from_bytes(ipfs.cat(pool_task_set_cid, max_size=256 << 20), name=pool_task_set_cid)
    if src.startswith("synthetic:"):
        from intellect.agents.tasks import synthetic_task_set

        try:
            _, n, seed = src.split(":")
            ts = synthetic_task_set(int(n), seed=int(seed), max_operand=20, ops=("+",), name=src)
        except ValueError as exc:
            raise AgentError(f"tasks.source {src!r}: expected synthetic:N:SEED ({exc})") from None
    else:
        ts = TaskSet.load(Path(src))
    if pool_task_set_cid and pool_task_set_cid != empty:
        cid = compute_cid(ts.to_jsonl_bytes())
        if cid != pool_task_set_cid:
            raise AgentError(f"task set {src} has CID {cid}, the pool names {pool_task_set_cid}: wrong task set")
    return ts


# ---------------------------------------------------------------------------------------------
# peers


class Directory:
    """Nodes from the registry (NodeRegistered events + `nodeInfo` views) and their `/status` documents."""

    def __init__(self, protocol: Any, ttl: float = 5.0, timeout: float = 3.0) -> None:
        self.protocol = protocol
        self.ttl = ttl
        self.timeout = timeout
        self._nodes: dict[str, Any] = {}
        self._scanned_at = 0.0
        self._status: dict[str, tuple[float, dict[str, Any] | None]] = {}
        self._lock = threading.Lock()
        self._session = requests.Session()

    def nodes(self, refresh: bool = False) -> dict[str, Any]:
        with self._lock:
            if refresh or time.monotonic() - self._scanned_at > self.ttl:
                addrs = {e.args["node"] for e in self.protocol.get_events(["NodeRegistered", "NodeUpdated"])}
                self._nodes = {a: self.protocol.node(a) for a in sorted(addrs)}
                self._scanned_at = time.monotonic()
            return dict(self._nodes)

    def node(self, address: str) -> Any:
        from web3 import Web3

        a = Web3.to_checksum_address(address)
        n = self.nodes().get(a)
        return n if n is not None else self.protocol.node(a)

    def by_role(self, role: str) -> list[Any]:
        from intellect.sdk import NodeStatus, Role

        r = Role.parse(role)
        return [n for n in self.nodes().values() if n.role == r and n.status == NodeStatus.ACTIVE]

    def status(self, address: str) -> dict[str, Any] | None:
        """The node's `/status` document (cached `ttl` seconds), None if unreachable."""
        now = time.monotonic()
        cached = self._status.get(address.lower())
        if cached is not None and now - cached[0] < self.ttl:
            return cached[1]
        doc: dict[str, Any] | None = None
        try:
            endpoint = self.node(address).endpoint
            if endpoint:
                resp = self._session.get(endpoint.rstrip("/") + "/status", timeout=self.timeout)
                if resp.ok:
                    doc = resp.json()
        except (requests.RequestException, ValueError) as exc:
            log.debug("status of %s unavailable: %s", address, exc)
        self._status[address.lower()] = (now, doc)
        return doc

    def service(self, address: str, name: str) -> str | None:
        doc = self.status(address)
        return None if doc is None else (doc.get("services") or {}).get(name)

    def services(self, name: str, roles: tuple[str, ...] = ("worker", "validator", "trainer", "relay")) -> list[str]:
        out: list[str] = []
        for role in roles:
            for n in self.by_role(role):
                url = self.service(n.address, name)
                if url and url not in out:
                    out.append(url)
        return out


# ---------------------------------------------------------------------------------------------
# the agent base


class Agent:
    """Base of the role agents. Subclasses set `role`, implement `loop()` and extend `status()`."""

    role = "agent"
    node_role: str | None = None  # registry role; None = no registration

    def __init__(self, cfg: AgentConfig) -> None:
        self.cfg = cfg
        self.data_dir = Path(cfg.data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.stop_event = threading.Event()
        self.metrics = Metrics()
        self.metrics.declare("up", "gauge", "1 while the agent runs")
        self.metrics.declare("chain_head", "gauge", "latest block seen")
        self.metrics.declare("errors_total", "counter", "errors by kind")
        self.doing = "starting"
        self.counters: dict[str, int] = {}
        self._counter_lock = threading.Lock()
        self.state = StateStore(self.data_dir / "state.sqlite")
        self.protocol: Any = None
        self.ipfs: Any = None
        self.gateway: Any = None
        self.server: AgentServer | None = None
        self.directory: Directory | None = None
        self.pool_id: int = 0
        self._closers: list[Callable[[], None]] = []

    # -- counters ------------------------------------------------------------------------------
    def count(self, name: str, amount: int = 1) -> None:
        with self._counter_lock:
            self.counters[name] = self.counters.get(name, 0) + amount
            self.state.set(f"counter:{name}", self.counters[name])

    def _load_counters(self) -> None:
        for key in list(self._counter_names()):
            self.counters[key] = int(self.state.get(f"counter:{key}", 0))

    def _counter_names(self) -> list[str]:
        return []

    # -- set-up --------------------------------------------------------------------------------
    def connect(self) -> None:
        from intellect.sdk import Protocol

        c = self.cfg.chain
        password = os.environ.get(c.password_env) if c.keystore is not None else None
        if c.keystore is not None and password is None and c.password_file is None:
            raise AgentError(f"chain.keystore is set but neither ${c.password_env} nor chain.password_file is")
        if c.keystore is None and c.dev_account is None:
            raise AgentError("no account: set chain.keystore (+ password) or, on a local chain, chain.dev_account")
        self.protocol = Protocol.connect(
            c.network, rpc_url=c.rpc_url, deployment=c.deployment_file, keystore=c.keystore, password=password,
            password_file=c.password_file, dev_account_index=c.dev_account,
        )
        pool_id = c.pool_id if c.pool_id is not None else self.protocol.deployment.default_pool_id
        if pool_id is None:
            raise AgentError("chain.pool_id is unset and the deployment has no default pool")
        self.pool_id = int(pool_id)
        self.pool = self.protocol.pool(self.pool_id)
        self.directory = Directory(self.protocol)
        log.info("%s %s on chain %d, pool %d", self.role, self.protocol.address, self.protocol.chain_id, self.pool_id)

    def open_ipfs(self) -> None:
        from intellect.sdk.ipfs import EmbeddedIpfs, IpfsGateway, KuboIpfs

        if self.cfg.ipfs.backend == "kubo":
            self.ipfs = KuboIpfs(str(self.cfg.ipfs.api_url))
            return
        self.ipfs = EmbeddedIpfs(self.data_dir / "ipfs", timeout=10.0)
        if self.cfg.ipfs.gateway:
            self.gateway = IpfsGateway(self.ipfs, host=self.cfg.server.host, port=0).start()
            self._closers.append(self.gateway.stop)

    def refresh_ipfs_peers(self, extra: list[str] | None = None) -> None:
        """Embedded store: fetch misses from every known agent's gateway (plus `extra` first)."""
        if self.directory is None or not hasattr(self.ipfs, "peers"):
            return
        mine = self.gateway.url if self.gateway is not None else None
        peers = [p for p in (extra or []) if p] + self.directory.services("ipfs")
        self.ipfs.peers = [p.rstrip("/") for p in dict.fromkeys(peers) if p and p != mine]

    def start_server(self) -> None:
        s = self.cfg.server
        self.server = AgentServer(self.status, self.metrics, host=s.host, port=s.port).start()
        self._closers.append(self.server.stop)
        url_file = self.data_dir / "url"  # where local tools (tests, the demo) find this agent
        url_file.write_text(self.server.url + "\n")

    @property
    def public_url(self) -> str:
        assert self.server is not None
        return self.cfg.server.public_url or self.server.url

    def services(self) -> dict[str, str]:
        out = {"status": self.public_url + "/status", "metrics": self.public_url + "/metrics"}
        if self.gateway is not None:
            out["ipfs"] = self.gateway.url
        return out

    def ensure_node(self, *, gpu_model: str = "cpu", vram_gib: int = 0, gpu_count: int = 0,
                    stake_amount: float = 0.0, auto_stake: bool = True) -> None:
        """Register this account's node in `node_role` (endpoint = this agent's URL) and stake the minimum."""
        from intellect.sdk import NodeStatus, Role

        p = self.protocol
        role = Role.parse(self.node_role)
        node = p.node()
        if node.status == NodeStatus.NONE:
            if not auto_stake:
                raise AgentError(f"node {p.address} is not registered as {role.name.lower()}; register it "
                                 f"(`intellect node register`) or enable auto_stake")
            p.register_node(role, gpu_model=gpu_model, vram_gib=vram_gib, gpu_count=gpu_count,
                            endpoint=self.public_url)
            log.info("registered node %s as %s at %s", p.address, role.name.lower(), self.public_url)
        elif node.role != role or node.status != NodeStatus.ACTIVE:
            raise AgentError(f"node {p.address} is registered as {node.role.name.lower()} ({node.status.name.lower()}), "
                             f"not an active {role.name.lower()}: use another key")
        elif (node.endpoint != self.public_url or node.gpu_model != gpu_model or node.vram_gib != vram_gib
              or node.gpu_count != gpu_count):
            p.update_node(p.address, gpu_model=gpu_model, vram_gib=vram_gib, gpu_count=gpu_count,
                          endpoint=self.public_url)
            log.info("updated node %s endpoint to %s", p.address, self.public_url)
        need = p.min_stake(role)
        have = p.active_stake(p.address)
        if have < need:
            if not auto_stake:
                raise AgentError(f"node {p.address} has {have / 1e18:g} tokens staked, the {role.name.lower()} "
                                 f"minimum is {need / 1e18:g}: stake (`intellect stake add`) or enable auto_stake")
            amount = max(need - have, int(stake_amount * 10**18))
            if p.balance_of() < amount + 20 * 10**18 and p.is_dev_chain:
                p.drip()
            p.stake(p.address, amount)
            log.info("staked %g tokens on %s", amount / 1e18, p.address)
        self.node_info = p.node()

    def start(self) -> None:
        """Connect, open IPFS and the server. Subclasses extend (call super first)."""
        self.connect()
        self.open_ipfs()
        self.start_server()

    # -- running -------------------------------------------------------------------------------
    def loop(self) -> None:
        raise NotImplementedError

    def wait(self, seconds: float) -> bool:
        """Sleep unless stopping; True if a stop was requested."""
        return self.stop_event.wait(seconds)

    def install_signals(self) -> None:
        def handler(signum: int, _frame: Any) -> None:
            log.info("signal %d: stopping after the current step", signum)
            self.stop_event.set()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    def run(self) -> None:
        """Start, loop until stopped, close cleanly. A crash in the loop is logged and re-raised."""
        self.metrics.set("up", 1)
        try:
            self.start()
            self.doing = "running"
            self.loop()
        finally:
            self.doing = "stopped"
            self.metrics.set("up", 0)
            self.close()

    def close(self) -> None:
        for fn in reversed(self._closers):
            try:
                fn()
            except Exception:  # closing must go on
                log.exception("closing failed")
        self._closers.clear()
        self.state.close()

    # -- status --------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        head = None
        if self.protocol is not None:
            try:
                head = self.protocol.block_number()
                self.metrics.set("chain_head", head)
            except Exception:  # status must answer even when the RPC is down
                head = None
        return {
            "schema": STATUS_SCHEMA,
            "role": self.role,
            "node": self.protocol.address if self.protocol is not None and self.protocol.account else None,
            "pool": self.pool_id,
            "chain_id": self.protocol.chain_id if self.protocol is not None else None,
            "chain_head": head,
            "doing": self.doing,
            "counters": dict(self.counters),
            "services": self.services() if self.server is not None else {},
            "pid": os.getpid(),
        }
