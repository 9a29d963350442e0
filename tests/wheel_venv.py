"""A fresh venv with the wheel built from this checkout and one of its extras (role extras: pyproject.toml), the
versions pinned to requirements.lock (without its hashes): how an operator installs a node. Shared by the test
folders (`tests/conftest.py` puts this folder on sys.path)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def build_wheel(tmp_path: Path) -> Path:
    """The wheel of a copy of the sources (the checkout's build/ stays untouched)."""
    src = tmp_path / "src"
    src.mkdir(parents=True)
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    for pkg in ("sdk", "verifier", "agents"):
        shutil.copytree(REPO / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(wheels), str(src)], check=True, timeout=300)
    [wheel] = list(wheels.glob("intellect_protocol-*.whl"))
    return wheel


def node_venv(tmp_path: Path, extra: str) -> Path:
    """A venv (no system site-packages) with `wheel[extra]` installed; returns its bin/ folder."""
    wheel = build_wheel(tmp_path)
    pins = tmp_path / "pins.txt"
    pins.write_text("\n".join(m.group(0) for m in re.finditer(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[^\s\\;]+",
                                                               (REPO / "requirements.lock").read_text(), re.M)))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    "--no-compile", "-c", str(pins), f"{wheel}[{extra}]"], check=True, timeout=1800)
    return venv / "bin"


def node_env(bin_: Path) -> dict[str, str]:
    """An environment that sees the venv and the system's binaries, nothing of the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{bin_}{os.pathsep}/usr/bin:/bin"
    return env
