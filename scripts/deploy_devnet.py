"""Deploy the contracts onto a dev chain that is already running: the deploy command of `intellect.sdk.devnet`.

    python scripts/deploy_devnet.py http://127.0.0.1:8545 OUT_DIR

Loads the brownie project of this checkout, attaches brownie's `development` network to the node at the URL
(`_anvil.attach_development`), runs `deploy_all` (the wiring of `brownie run deploy`) with the development
parameters, or the DeployParams JSON file named by INTELLECT_DEPLOY_PARAMS, and writes OUT_DIR/<chainId>.json.
Its last line on stdout is `INTELLECT_DEPLOYMENT=<path of that file>` (`intellect.sdk.devnet.DEPLOY_MARKER`).

The SDK runs this program in a subprocess and reads the deployment file it wrote; it imports nothing of
scripts/ (the brownie side may import the SDK, never the other way round).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def deploy_to(url: str, out_dir: Path) -> Path:
    """Deploy with dev parameters onto the node at `url`; the path of the deployment file written in `out_dir`."""
    from brownie import accounts, network, project

    from scripts._anvil import attach_development
    from scripts._deployment import params_for_network
    from scripts.deploy import deploy_all

    project.load(str(ROOT), name="IntellectProtocol")
    attach_development(url)
    network.connect("development")
    try:
        network.priority_fee("1 gwei")  # brownie's development default is gas price 0, below anvil's base fee
        params = params_for_network("development", os.environ.get("INTELLECT_DEPLOY_PARAMS"))
        return deploy_all(accounts[0], params, dev=True).deployment.write(out_dir)
    finally:
        network.disconnect(kill_rpc=False)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python scripts/deploy_devnet.py RPC_URL OUT_DIR", file=sys.stderr)
        return 2
    os.chdir(ROOT)  # brownie resolves the project's build/ and config from here
    # `scripts.*` from the checkout's root, not this folder's files as top-level modules
    sys.path[:] = [str(ROOT), *(p for p in sys.path if Path(p or ".").resolve() not in (ROOT, ROOT / "scripts"))]
    from intellect.sdk.devnet import DEPLOY_MARKER

    path = deploy_to(args[0], Path(args[1]))
    print(DEPLOY_MARKER + str(path), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
