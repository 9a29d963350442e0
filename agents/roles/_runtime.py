"""What every role agent shares: chain connection, node registration and stake, local IPFS and
its gateway, the HTTP face, crash-safe state, peer discovery, logging and graceful shutdown.

    agent = Worker(cfg)      # a subclass of Agent
    agent.run()              # blocks until SIGTERM/SIGINT or the role's work is done

Peers are found through the chain: every agent registers its node with its AgentServer URL as
the endpoint, and serves `/status` naming its other services (IPFS gateway, Shardcast). Nothing
else is configured by hand on a local swarm.
"""

from __future__ import annotations

import faulthandler
import json
import logging
import math
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from intellect.agents.config import AgentConfig, ConfigError, TaskSettings
from intellect.agents.roles._server import AgentServer, HttpError, Metrics
from intellect.agents.roles._state import StateStore
from intellect.agents.tasks import synthetic_task_set
from intellect.sdk import LISTING_FLOOR, Cursor, IntellectError, NodeStatus, Protocol, Role
from intellect.sdk.http import PeerHttpError, fetch
from intellect.sdk.ipfs import GATEWAY_LIMITS as LIMITS
from intellect.sdk.ipfs import EmbeddedIpfs, IpfsGateway, KuboIpfs, compute_cid
from intellect.sdk.peers import MAX_STATUS_BYTES, PeerDocumentError, parse_status, peer_service
from intellect.verifier.tasks import TaskSet

__all__ = [
    "LISTING_FLOOR",
    "MAX_ATTESTATIONS_PAGE",
    "STATUS_SCHEMA",
    "Agent",
    "AgentError",
    "Directory",
    "JsonFormatter",
    "PeerDocumentError",
    "StateCursorStore",
    "attestation_page",
    "attestations_reply",
    "bare_hex",
    "load_task_set",
    "notify_systemd",
    "parse_status",
    "peer_service",
    "setup_logging",
]

log = logging.getLogger(__name__)

STATUS_SCHEMA = "intellect.agent.status/v1"


class AgentError(IntellectError, RuntimeError):
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
        raw = self.store.get(self.key)
        return None if raw is None else Cursor.model_validate(raw)

    def save(self, cursor: Any) -> None:
        self.store.set(self.key, json.loads(cursor.model_dump_json()))


# ---------------------------------------------------------------------------------------------
# task sets


def load_task_set(settings: TaskSettings, pool_rules_cid: str | None, ipfs: Any) -> Any:
    """The pool's task set: from `tasks.source` (checked against the pool's CID when the pool names
    a real one) or fetched from IPFS by the pool's CID."""
    empty = compute_cid(b"")
    src = settings.source
    if src == "pool":
        if not pool_rules_cid or pool_rules_cid == empty:
            raise AgentError("the pool names no task set (empty CID): set tasks.source to synthetic:N:SEED or a path")
        ts = TaskSet.from_bytes(ipfs.cat(pool_rules_cid, max_size=256 << 20), name=pool_rules_cid)
        try:  # served to joiners from here on (issue 36): the blocks are local, nothing is fetched
            ipfs.pin(pool_rules_cid)
        except IntellectError as exc:
            log.warning("could not keep task set %s in this node's store: %s", pool_rules_cid, exc)
        return ts
    if src.startswith("synthetic:"):
        try:
            _, n, seed = src.split(":")
            ts = synthetic_task_set(int(n), seed=int(seed), max_operand=20, ops=("+",), name=src)
        except ValueError as exc:
            raise AgentError(f"tasks.source {src!r}: expected synthetic:N:SEED ({exc})") from None
    else:
        ts = TaskSet.load(Path(src))
    if pool_rules_cid and pool_rules_cid != empty:
        cid = compute_cid(ts.to_jsonl_bytes())
        if cid != pool_rules_cid:
            raise AgentError(f"task set {src} has CID {cid}, the pool names {pool_rules_cid}: wrong task set")
    return ts


def notify_systemd(message: str) -> bool:
    """Send `message` (`READY=1`, `WATCHDOG=1`, `STOPPING=1`, `STATUS=...`) to the service manager's notification
    socket (`NOTIFY_SOCKET`, set by systemd for a `Type=notify` unit; an abstract `@name` too); False, silently,
    when there is none or it does not answer. The protocol is one datagram per message (sd_notify(3))."""
    addr = os.environ.get("NOTIFY_SOCKET")
    if not addr:
        return False
    if addr.startswith("@"):
        addr = "\0" + addr[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(addr)
            sock.sendall(message.encode())
    except OSError as exc:
        log.debug("systemd notification %r not sent: %s", message, exc)
        return False
    return True


# ---------------------------------------------------------------------------------------------
# peers


MAX_IPFS_PEERS = 16
"""Most gateways an agent's embedded IPFS store asks for a missing block (after the ones a call names)."""
IPFS_PEER_ROLES = ("trainer", "relay", "validator", "worker")
"""Order in which registered nodes' gateways are tried."""
MAX_ATTESTATIONS_PAGE = 256
"""Most attestations one `GET /attestations` answers or one pull asks for (about 130 KB of JSON)."""


def attestation_page(records: list[dict[str, Any]], since: float, after: int, limit: int) -> list[dict[str, Any]]:
    """The `limit` state records after cursor (since, after) in (updated_at, id) order: a stable paging
    that neither skips nor repeats records whose `updated_at` ties across a page boundary. The reference
    over records in memory; the endpoint seeks the same page in the state's index (`StateStore.page`)."""
    newer = [r for r in records if (r["updated_at"], int(r["id"])) > (since, after)]
    newer.sort(key=lambda r: (r["updated_at"], int(r["id"])))
    return newer[:limit]


_INT64 = 2**63


def attestations_reply(state: StateStore, query: dict[str, list[str]]) -> list[dict[str, Any]]:
    """The validator's `GET /attestations?since=T&after=ID&limit=N`: its attestations in (updated_at, id) order
    after the cursor (T, ID), at most N (≤ `MAX_ATTESTATIONS_PAGE`) of them; each carries `_updated_at` and
    `_id`, the cursor of the next page. A page shorter than N is the last. Costs the page: an index seek that
    reads and decodes at most N records, on the state's read connection (`StateStore.page`)."""
    try:
        since = float(query.get("since", ["0"])[0])
        after = int(query.get("after", ["-1"])[0])
        limit = int(query.get("limit", [str(MAX_ATTESTATIONS_PAGE)])[0])
    except ValueError:
        raise HttpError(400, "since (seconds since the epoch), after (an id) and limit must be numbers") from None
    if not math.isfinite(since) or not -_INT64 <= after < _INT64:
        raise HttpError(400, "since must be finite and after a 64-bit integer")
    if not 1 <= limit <= MAX_ATTESTATIONS_PAGE:
        raise HttpError(400, f"limit must be in [1, {MAX_ATTESTATIONS_PAGE}]")
    page = state.page("attestation", since, after, limit)
    return [r["data"]["attestation"] | {"_updated_at": r["updated_at"], "_id": int(r["id"])} for r in page]


def bare_hex(value: str | bytes) -> str:
    """A decoded bytes32 event argument (a claim's seed) as bare hex: the SDK gives hex strings, web3 may give
    bytes."""
    return value.removeprefix("0x") if isinstance(value, str) else bytes(value).hex()


_DIRECTORY_EVENTS = ["NodeRegistered", "NodeUpdated", "NodeExited", "NodeKeyRotated", "StakeUpdated", "MinStakeSet"]


class Directory:
    """Nodes from the registry and their `/status` documents, with bounded work per stranger.

    - Only nodes with stake are listed: `by_role`, `services` and `nodes` consider an active node
      of role R only while its active stake is at least `max(minStake(R), min_listed_stake)`
      (default `LISTING_FLOOR`). A registration without that stake costs every other agent no
      `/status` fetch and no node read: its author pays for its listing, not everyone else.
    - Nodes and stakes are followed incrementally: each refresh (at most every `ttl` seconds)
      reads only the NodeRegistered / NodeUpdated / NodeExited / NodeKeyRotated / StakeUpdated / MinStakeSet events
      since the last block it read (stake from `StakeUpdated.active`, no call per node), and reads
      a node's record only when a listed node registered, changed or newly reached the stake.
    - A `/status` fetch has a total deadline (`timeout`, `intellect.sdk._fetch.fetch`): a peer that
      drips its answer is cut off at the deadline, however slowly it sends. A peer that fails or
      stalls is benched (`bench_base` seconds, doubled per offence up to `bench_max`; `penalise`)
      and not asked again meanwhile; documents are cached `status_ttl` seconds.
    - `services()` fetches the documents it lacks concurrently (`max_parallel`), so one slow peer
      costs one deadline, not one per peer in a row, and at most `max_fetch_per_call` of them per
      call, the most staked first (the rest on later calls).
    """

    def __init__(self, protocol: Any, ttl: float = 5.0, timeout: float = 3.0, *, status_ttl: float = 30.0,
                 bench_base: float = 30.0, bench_max: float = 600.0, max_parallel: int = 16,
                 max_fetch_per_call: int = 64, min_listed_stake: int = LISTING_FLOOR) -> None:
        self.protocol = protocol
        self.ttl = ttl
        self.timeout = timeout
        self.status_ttl = status_ttl
        self.bench_base = bench_base
        self.bench_max = bench_max
        self.max_parallel = max_parallel
        self.max_fetch_per_call = max_fetch_per_call
        self.min_listed_stake = min_listed_stake
        self._nodes: dict[str, Any] = {}  # listed nodes (checksum address -> Node)
        self._role: dict[str, int] = {}  # active registered nodes' roles, from NodeRegistered / NodeExited
        self._stake: dict[str, int] = {}  # active stake, from StakeUpdated
        self._min: dict[int, int] = {}  # role -> on-chain minimum stake (read once, then MinStakeSet)
        self._scanned_at = 0.0
        self._block: int | None = None  # last block whose events are in the maps above
        self._status: dict[str, tuple[float, dict[str, Any] | None]] = {}
        self._bench: dict[str, tuple[float, int]] = {}  # address -> (benched until, offences)
        self._lock = threading.Lock()

    def listing_stake(self, role: int) -> int:
        """Active stake a node of `role` needs to be listed."""
        return max(self._min.get(int(role), 0), self.min_listed_stake)

    def _listed(self, address: str) -> bool:
        role = self._role.get(address)
        return role is not None and self._stake.get(address, 0) >= self.listing_stake(role)

    def nodes(self, refresh: bool = False) -> dict[str, Any]:
        """The listed nodes (active, staked as `listing_stake` asks), followed from events since the last call."""
        with self._lock:
            if refresh or time.monotonic() - self._scanned_at > self.ttl:
                head = self.protocol.block_number()
                start = None if self._block is None else self._block + 1
                if start is None:
                    self._min = {int(r): self.protocol.min_stake(r) for r in Role if r != Role.NONE}
                if start is None or start <= head:
                    changed: set[str] = set()  # registered, updated or exited: the record to read again
                    seen: set[str] = set()
                    rules_moved = False
                    for e in self.protocol.get_events(_DIRECTORY_EVENTS, from_block=start, to_block=head):
                        if e.event == "MinStakeSet":
                            if start is not None:  # the first scan read the minimums at the head
                                self._min[int(e.args["role"])] = int(e.args["amount"])
                                rules_moved = True
                            continue
                        if e.event == "NodeKeyRotated":  # the node moved to a new key (issue 36)
                            old, new = e.args["oldNode"], e.args["newNode"]
                            self._role.pop(old, None)
                            self._role[new] = int(e.args["role"])
                            seen.update((old, new))
                            changed.update((old, new))
                            continue
                        a = e.args["node"]
                        seen.add(a)
                        if e.event == "StakeUpdated":
                            self._stake[a] = int(e.args["active"])
                            continue
                        changed.add(a)
                        if e.event == "NodeRegistered":
                            self._role[a] = int(e.args["role"])
                        elif e.event == "NodeExited":
                            self._role.pop(a, None)
                    # a moved minimum re-decides every known node; otherwise only those the events name
                    todo = (set(self._role) | set(self._nodes) | seen) if rules_moved else seen
                    for a in sorted(todo):
                        if not self._listed(a):
                            if self._nodes.pop(a, None) is not None:
                                self._status.pop(a.lower(), None)
                        elif a in changed or a not in self._nodes:
                            old = self._nodes.get(a)
                            self._nodes[a] = self.protocol.node(a)
                            self._status.pop(a.lower(), None)  # its endpoint may have changed
                            if old is not None and old.endpoint != self._nodes[a].endpoint:
                                # a node back with a new endpoint (a restart on another port) is asked afresh:
                                # its bench was earned by the old one, and would hide its files for up to
                                # bench_max (seen: a restarted worker's work challenged as unavailable)
                                self._bench.pop(a.lower(), None)
                    self._block = head
                self._scanned_at = time.monotonic()
            return dict(self._nodes)

    def stake(self, address: str) -> int:
        """A node's active stake as the last refresh saw it (0 if unknown)."""
        from web3 import Web3

        return self._stake.get(Web3.to_checksum_address(address), 0)

    def node(self, address: str) -> Any:
        from web3 import Web3

        a = Web3.to_checksum_address(address)
        n = self.nodes().get(a)
        return n if n is not None else self.protocol.node(a)

    def by_role(self, role: str) -> list[Any]:
        """Active nodes of `role` with the stake to be listed, the most staked first."""

        r = Role.parse(role)
        found = [n for n in self.nodes().values() if n.role == r and n.status == NodeStatus.ACTIVE]
        return sorted(found, key=lambda n: -self._stake.get(n.address, 0))

    def benched(self, address: str) -> bool:
        """True while a peer that failed or stalled is left alone."""
        b = self._bench.get(address.lower())
        return b is not None and time.monotonic() < b[0]

    def penalise(self, address: str, reason: object = "") -> float:
        """Bench a peer that failed or stalled: `bench_base` seconds, doubled per offence up to `bench_max`
        (returns the pause)."""
        key = address.lower()
        offences = self._bench.get(key, (0.0, 0))[1] + 1
        pause = min(self.bench_max, self.bench_base * 2 ** (offences - 1))
        self._bench[key] = (time.monotonic() + pause, offences)
        log.debug("peer %s unavailable (%s): benched %.0f s", address, reason, pause)
        return pause

    def pardon(self, address: str) -> None:
        """A peer answered: its offences are forgotten."""
        self._bench.pop(address.lower(), None)

    def _fetch_status(self, address: str, endpoint: str) -> dict[str, Any] | None:
        url = endpoint.rstrip("/") + "/status"
        doc: dict[str, Any] | None = None
        try:
            reply = fetch("GET", url, deadline=self.timeout, max_bytes=MAX_STATUS_BYTES)
            if not reply.ok:
                raise PeerDocumentError(f"status of {url}: HTTP {reply.status}")
            doc = parse_status(reply.body, url)
            self.pardon(address)
        except (PeerHttpError, ValueError) as exc:  # PeerDocumentError is a ValueError
            self.penalise(address, exc)
        self._status[address.lower()] = (time.monotonic(), doc)
        return doc

    def status(self, address: str) -> dict[str, Any] | None:
        """The node's `/status` document (cached `status_ttl` seconds), None if unreachable or benched.
        Any registered node by address (the pool's trainer is named by its pool, not found by role)."""
        cached = self._status.get(address.lower())
        if cached is not None and time.monotonic() - cached[0] < self.status_ttl:
            return cached[1]
        if self.benched(address):
            return None
        try:
            endpoint = self.node(address).endpoint
        except Exception as exc:  # an RPC failure: no document this time
            log.debug("node %s unavailable: %s", address, exc)
            return None
        return self._fetch_status(address, endpoint) if endpoint else None

    def service(self, address: str, name: str) -> str | None:
        doc = self.status(address)
        return None if doc is None else peer_service(doc, name)

    def services(self, name: str, roles: tuple[str, ...] = ("worker", "validator", "trainer", "relay")) -> list[str]:
        """Service `name`'s URL of every listed node of `roles` that names one (stale documents are
        fetched concurrently first: the whole call takes at most about one `timeout`)."""
        from concurrent.futures import ThreadPoolExecutor

        nodes = [n for role in roles for n in self.by_role(role)]
        now = time.monotonic()
        todo = [n for n in nodes if n.endpoint and not self.benched(n.address)
                and now - self._status.get(n.address.lower(), (-1e18, None))[0] >= self.status_ttl]
        todo.sort(key=lambda n: -self._stake.get(n.address, 0))
        todo = todo[: self.max_fetch_per_call]  # the rest on later calls, each fetch bounded by its deadline
        if len(todo) == 1:
            self._fetch_status(todo[0].address, todo[0].endpoint)
        elif todo:
            with ThreadPoolExecutor(max_workers=min(self.max_parallel, len(todo)), thread_name_prefix="status") as ex:
                list(ex.map(lambda n: self._fetch_status(n.address, n.endpoint), todo))
        out: list[str] = []
        for n in nodes:  # documents at hand only: nothing more is fetched here
            doc = self._status.get(n.address.lower(), (0.0, None))[1]
            url = None if doc is None else peer_service(doc, name)
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
        self.last_beat = time.monotonic()  # the role loop's last pass (`wait`): /healthz and systemd's watchdog
        usec = os.environ.get("WATCHDOG_USEC", "")
        self._watchdog_s = int(usec) / 2e6 if usec.isdigit() and int(usec) > 0 else None
        self._watchdog_sent = 0.0
        self.metrics = Metrics()
        self.metrics.declare("up", "gauge", "1 while the agent runs")
        self.metrics.declare("chain_head", "gauge", "latest block seen")
        self.metrics.declare("errors_total", "counter", "errors by kind")
        self.doing = "starting"
        self.counters: dict[str, int] = {}
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
        # under the state store's lock, not one of the counters' own: `count` runs inside state transactions
        # (a published step's submissions consumed) and from HTTP threads; two locks taken in both orders
        # deadlocked the trainer (tests/roles/test_roles_counter_lock.py)
        with self.state.locked():
            self.counters[name] = self.counters.get(name, 0) + amount
            self.state.set(f"counter:{name}", self.counters[name])

    def _load_counters(self, *names: str) -> None:
        """Start the named counters from the values `count` kept in the state store (a restart resumes them)."""
        for name in names:
            self.counters[name] = int(self.state.get(f"counter:{name}", 0))

    # -- set-up --------------------------------------------------------------------------------
    def connect(self) -> None:
        c = self.cfg.chain
        password = os.environ.get(c.password_env) if c.keystore is not None else None
        if c.keystore is not None and password is None and c.password_file is None:
            raise AgentError(f"chain.keystore is set but neither ${c.password_env} nor chain.password_file is")
        if c.keystore is None and c.dev_account is None:
            raise AgentError("no account: set chain.keystore (+ password) or, on a local chain, chain.dev_account")
        self.protocol = Protocol.connect(
            c.network, rpc_url=c.rpc_url, deployment=c.deployment_file, keystore=c.keystore, password=password,
            password_file=c.password_file, dev_account_index=c.dev_account, descriptor=c.descriptor,
        )
        pool_id = c.pool_id if c.pool_id is not None else self.protocol.deployment.default_pool_id
        if pool_id is None:
            raise AgentError("chain.pool_id is unset and the deployment has no default pool")
        self.pool_id = int(pool_id)
        self.pool = self.protocol.pool(self.pool_id)
        self.directory = Directory(self.protocol)
        log.info("%s %s on chain %d, pool %d", self.role, self.protocol.address, self.protocol.chain_id, self.pool_id)

    def open_ipfs(self) -> None:
        if self.cfg.ipfs.backend == "kubo":
            self.ipfs = KuboIpfs(str(self.cfg.ipfs.api_url))
            return
        self.ipfs = EmbeddedIpfs(self.data_dir / "ipfs", timeout=10.0)
        if self.cfg.ipfs.gateway:
            s = self.cfg.server
            self.gateway = IpfsGateway(self.ipfs, host=s.host, port=s.ipfs_port, limits=s.limits(LIMITS)).start()
            self._closers.append(self.gateway.stop)

    def refresh_ipfs_peers(self, extra: list[str] | None = None) -> None:
        """Embedded store: fetch misses from every known agent's gateway (plus `extra` first)."""
        if self.directory is None or not hasattr(self.ipfs, "peers"):
            return
        mine = self.ipfs_public_url
        # the pool's own nodes first: registration is free, so workers' gateways may be many and hostile
        peers = [p for p in (extra or []) if p] + self.directory.services("ipfs", roles=IPFS_PEER_ROLES)
        self.ipfs.peers = [p.rstrip("/") for p in dict.fromkeys(peers) if p and p != mine][:MAX_IPFS_PEERS]

    def shardcast_sources(self) -> list[str]:
        """Where this node fetches checkpoint shards: the pool trainer's Shardcast origin, then the relays'."""
        assert self.directory is not None
        origin = self.directory.service(self.pool.params.trainer, "shardcast")
        return ([origin] if origin else []) + self.directory.services("shardcast", roles=("relay",))

    def start_server(self) -> None:
        s = self.cfg.server
        self.server = AgentServer(self.status, self.metrics, host=s.host, port=s.port, read_rate=s.read_rate,
                                  read_burst=s.read_burst, limits=s.limits(AgentServer.default_limits)).start()
        self._closers.append(self.server.stop)
        self.server.route("GET", "/healthz", lambda _q, _b: self.liveness())
        url_file = self.data_dir / "url"  # where local tools (tests, the demo) find this agent
        url_file.write_text(self.server.url + "\n")

    @property
    def public_url(self) -> str:
        """This agent's URL as other nodes reach it (server.public_url / public_host; the bound one on loopback)."""
        assert self.server is not None
        if not self.cfg.server.advertise:  # no inbound route: register no endpoint peers would try in vain
            return ""
        return self.cfg.server.advertised("status", self.server.url)

    @property
    def ipfs_public_url(self) -> str | None:
        """The IPFS gateway peers fetch this node's objects from (None: this node serves none)."""
        if not self.cfg.server.advertise:
            return None
        if self.gateway is not None:
            return self.cfg.server.advertised("ipfs", self.gateway.url)
        if self.cfg.ipfs.backend == "kubo" and self.cfg.server.ipfs_public_url:  # the Kubo node's own gateway
            return str(self.cfg.server.ipfs_public_url).rstrip("/")
        return None

    def services(self) -> dict[str, str]:
        if not self.cfg.server.advertise:
            return {}
        out = {"status": self.public_url + "/status", "metrics": self.public_url + "/metrics"}
        if (gw := self.ipfs_public_url) is not None:
            out["ipfs"] = gw
        return out

    def ensure_node(self, *, gpu_model: str = "cpu", vram_gib: int = 0, gpu_count: int = 0,
                    stake_amount: float = 0.0, auto_stake: bool = True) -> None:
        """Register this account's node in `node_role` (endpoint = this agent's URL) and stake the role's
        minimum, and at least `LISTING_FLOOR` when it advertises an endpoint (else peers do not list it)."""

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
        elif node.status == NodeStatus.ROTATED:  # a configuration error: a restart with this key fails the same way
            raise ConfigError(f"chain.keystore's key {p.address} was rotated to {p.current_key(p.address)} by its "
                              f"owner (NodeKeyRotated): start the agent with the new key's keystore")
        elif node.role != role or node.status != NodeStatus.ACTIVE:
            raise AgentError(f"node {p.address} is registered as {node.role.name.lower()} ({node.status.name.lower()}), "
                             f"not an active {role.name.lower()}: use another key")
        elif (node.endpoint != self.public_url or node.gpu_model != gpu_model or node.vram_gib != vram_gib
              or node.gpu_count != gpu_count):
            p.update_node(p.address, gpu_model=gpu_model, vram_gib=vram_gib, gpu_count=gpu_count,
                          endpoint=self.public_url)
            log.info("updated node %s endpoint to %s", p.address, self.public_url)
        need = p.min_stake(role)
        if self.cfg.server.advertise:  # peers list a node by role only with this much stake (`Directory`)
            need = max(need, LISTING_FLOOR)
        have = p.active_stake(p.address)
        if have < need:
            if not auto_stake:
                raise AgentError(f"node {p.address} has {have / 1e18:g} tokens staked, a listed "
                                 f"{role.name.lower()} needs {need / 1e18:g}: stake (`intellect stake add`) or "
                                 f"enable auto_stake")
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
        """Sleep unless stopping; True if a stop was requested. Each call is a heartbeat of the role's loop."""
        self.beat()
        return self.stop_event.wait(seconds)

    def wait_on(self, cond: threading.Condition, seconds: float) -> None:
        """A heartbeat (`beat`), then wait up to `seconds` for `cond` to be notified."""
        self.beat()
        with cond:
            cond.wait(seconds)

    def beat(self) -> None:
        """The role's loop came round: /healthz stays live, and under a systemd watchdog (`WATCHDOG_USEC`) a
        `WATCHDOG=1` goes out at most every half period. Only the loop beats: a hung loop is restarted."""
        self.last_beat = now = time.monotonic()
        if self._watchdog_s is not None and now - self._watchdog_sent >= self._watchdog_s:
            self._watchdog_sent = now
            notify_systemd("WATCHDOG=1")

    def liveness(self) -> dict[str, Any]:
        """`GET /healthz`: 200 with the loop's age while it came round within `server.liveness_s`, else 503."""
        age = time.monotonic() - self.last_beat
        if self.stop_event.is_set() or age > self.cfg.server.liveness_s:
            why = "stopping" if self.stop_event.is_set() else f"the loop last came round {age:.0f} s ago"
            raise HttpError(503, f"not live: {why} (server.liveness_s {self.cfg.server.liveness_s:g})")
        return {"live": True, "loop_age_s": round(age, 3), "doing": self.doing}

    def install_signals(self) -> None:
        """SIGTERM/SIGINT stop after the current step; SIGUSR1 writes every thread's stack to stderr (the log)
        and the agent goes on: how an operator (or a test that timed out) sees where a silent agent waits."""
        def handler(signum: int, _frame: Any) -> None:
            log.info("signal %d: stopping after the current step", signum)
            self.stop_event.set()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)
        faulthandler.register(signal.SIGUSR1, all_threads=True, chain=False)

    def run(self) -> None:
        """Start, loop until stopped, close cleanly. A crash in the loop is logged and re-raised."""
        self.metrics.set("up", 1)
        try:
            self.start()
            self.doing = "running"
            self.beat()
            notify_systemd(f"READY=1\nSTATUS={self.role} running")
            self.loop()
        finally:
            notify_systemd("STOPPING=1")
            self.doing = "stopped"
            self.metrics.set("up", 0)
            self.close()

    def close_last(self, fn: Callable[[], None]) -> None:
        """Have `close` call `fn` after every closer registered so far or later (before the state store closes)."""
        self._closers.insert(0, fn)

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
