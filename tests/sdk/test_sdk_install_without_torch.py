"""The SDK installs and works in a fresh venv that has no torch (and imports none)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from intellect.sdk.devnet import Devnet

REPO = Path(__file__).resolve().parents[2]
CORE_DEPS = ["web3==7.16.0", "pydantic>=2.7,<3", "click>=8.1", "rich>=13", "pyyaml>=6", "requests>=2.31",
             "aiohttp>=3.9"]


def test_sdk_import_loads_no_torch() -> None:
    # fast default check, in this venv (where torch IS installed): importing every SDK module pulls no torch
    mods = sorted(
        "intellect.sdk." + ".".join(p.relative_to(REPO / "sdk").with_suffix("").parts).removesuffix(".__init__")
        for p in (REPO / "sdk").rglob("*.py")
    )
    code = "import sys, importlib\n" + "".join(f"importlib.import_module({m.rstrip('.')!r})\n" for m in mods)
    code += "bad = [m for m in sys.modules if m == 'torch' or m.startswith('torch.')]\nassert not bad, bad\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]


@pytest.mark.slow  # ~90 s: builds a wheel and a fresh venv with the core dependencies
def test_install_without_torch_and_use(tmp_path: Path, net: Devnet) -> None:
    # build a wheel from a copy of the SDK sources (keeps the checkout's build/ untouched)
    src = tmp_path / "src"
    src.mkdir()
    for name in ("setup.py", "pyproject.toml", "README.md"):
        if (REPO / name).exists():
            shutil.copy(REPO / name, src / name)
    shutil.copytree(REPO / "sdk", src / "sdk", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for pkg in ("verifier", "agents"):
        (src / pkg).mkdir()
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(wheels), str(src)], check=True, timeout=300)
    [wheel] = list(wheels.glob("intellect_protocol-*.whl"))

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)  # no system site-packages
    py = venv / "bin" / "python"
    pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-compile"]
    subprocess.run([*pip, "--no-deps", str(wheel)], check=True, timeout=300)
    subprocess.run([*pip, *CORE_DEPS], check=True, timeout=600)

    script = textwrap.dedent(f"""
        import importlib.util, sys, tempfile
        from pathlib import Path
        assert importlib.util.find_spec("torch") is None, "torch is importable in the SDK-only venv"
        import intellect.sdk
        from intellect.sdk import Protocol, EventStream, format_tokens
        from intellect.sdk.ipfs import EmbeddedIpfs, compute_cid
        from intellect.sdk import cli
        assert "torch" not in sys.modules
        assert "intellect.sdk.abi" not in sys.modules
        assert compute_cid(b"hello\\n") == "bafkreicysg23kiwv34eg2d7qweipxwosdo2py4ldv42nbauguluen5v6am"
        store = EmbeddedIpfs(Path(tempfile.mkdtemp()))
        assert store.cat(store.add(b"x" * 300000)) == b"x" * 300000
        p = Protocol.connect({net.url!r}, deployment={str(net.deployment_file)!r}, dev_account_index=3)
        p.drip()
        print("balance", format_tokens(p.balance_of()))
        print("pool", p.pool(1).params.quorum)
        assert "torch" not in sys.modules
        print("OK", intellect.sdk.__file__)
    """)
    out = subprocess.run([str(py), "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "OK" in out.stdout and str(venv) in out.stdout  # the installed copy, not the checkout
    assert "balance 10000" in out.stdout
    helped = subprocess.run([str(venv / "bin" / "intellect"), "stake", "--help"], capture_output=True, text=True,
                            timeout=120)
    assert helped.returncode == 0 and "deposit" in helped.stdout
