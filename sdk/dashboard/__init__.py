"""intellect.sdk.dashboard: a web dashboard of one deployment, from the chain and the agents' `/status`.

    from intellect.sdk import Protocol
    from intellect.sdk.dashboard import Dashboard, DashboardServer
    server = DashboardServer(Dashboard(Protocol.connect("development")), port=8090).start()
    print(server.url)                     # open it in a browser

or `intellect dashboard --network base-sepolia --rpc-url ... --port 8090`. No torch, no external
assets: pages are self-contained HTML with inline CSS, JS and SVG charts.
"""

from ._collect import ChainIndex, StatusFetcher, challenge_table, collect, reward_curve, trainer_steps
from ._models import (
    AGENT_STATUS_SCHEMA,
    SNAPSHOT_SCHEMA,
    ChallengeView,
    CheckpointView,
    NodeView,
    PathEvent,
    PoolView,
    RewardPoint,
    Snapshot,
    SubmissionView,
    Totals,
    VoteView,
    parse_snapshot,
)
from ._server import Dashboard, DashboardServer

__all__ = [
    "AGENT_STATUS_SCHEMA",
    "SNAPSHOT_SCHEMA",
    "ChainIndex",
    "ChallengeView",
    "CheckpointView",
    "Dashboard",
    "DashboardServer",
    "NodeView",
    "PathEvent",
    "PoolView",
    "RewardPoint",
    "Snapshot",
    "StatusFetcher",
    "SubmissionView",
    "Totals",
    "VoteView",
    "challenge_table",
    "collect",
    "parse_snapshot",
    "reward_curve",
    "trainer_steps",
]
