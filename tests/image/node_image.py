"""Node images booted with their own systemd (issue 36): `tools/image/build-node-image.sh` with SYSTEMD=1 builds a
role's root filesystem (Debian, the wheel with the role's extra, deploy/systemd/intellect-agent@.service enabled);
`ImageAgent` boots it with systemd-nspawn, so the agent runs exactly as the shipped unit runs it on a host: under
the `intellect` user, sandboxed, Type=notify, restarted by systemd when it dies. The host's network is shared (the
agents reach the host's anvil and each other on 127.0.0.1), the root filesystem is a throw-away overlay
(`--volatile=overlay`), the agent's config is bound read-only at /etc/intellect and its state directory
/var/lib/intellect is a host folder the test reads.

`ImageAgent` answers what tests/roles/conftest.py's AgentProc answers (status, data_dir, alive, kill9, stop,
log_text), so `Swarm.wait` and `diagnose` work on a mix of both."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml
from swarm_loader import roles_helpers

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "tools" / "image" / "build-node-image.sh"
IMAGES = Path(os.environ.get("INTELLECT_IMAGE_DIR", "/var/tmp/intellect-images"))
STAMP = "etc/intellect-build-stamp"
"""in the root filesystem: the hash of the sources it was built from (a stale image is rebuilt)"""


def unavailable() -> str | None:
    """Why images cannot be built and booted here (None when they can)."""
    if os.geteuid() != 0:
        return "not root (mmdebstrap --mode=root, chroot and systemd-nspawn need it)"
    for tool in ("systemd-nspawn", "mmdebstrap", "nsenter"):
        if shutil.which(tool) is None:
            return f"no {tool} (Debian: apt-get install systemd-container mmdebstrap)"
    return None


def sources_stamp() -> str:
    """A hash over what goes into an image: the Python sources, the packaging, the unit, the lock, the script."""
    h = hashlib.sha256()
    files = [ROOT / "pyproject.toml", ROOT / "setup.py", ROOT / "requirements.lock", BUILD,
             ROOT / "deploy" / "systemd" / "intellect-agent@.service"]
    for top in ("sdk", "verifier", "agents"):
        files += sorted(p for p in (ROOT / top).rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for p in files:
        h.update(str(p.relative_to(ROOT)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def ensure_image(role: str, log: Path) -> Path:
    """The bootable root filesystem of `role`'s image, built (or rebuilt when the sources changed) under IMAGES."""
    out = IMAGES / role
    rootfs = out / "rootfs"
    stamp = sources_stamp()
    if (rootfs / STAMP).is_file() and (rootfs / STAMP).read_text().strip() == stamp:
        return rootfs
    out.mkdir(parents=True, exist_ok=True)
    base = "base-bookworm-python3-systemd.tar"
    if not (out / base).is_file() and (IMAGES / base).is_file():
        shutil.copy(IMAGES / base, out / base)  # Debian's part is the same for every role
    with open(log, "ab") as fh:
        subprocess.run(["bash", str(BUILD), role, str(out)], env={**os.environ, "SYSTEMD": "1", "TAR": "0"},
                       stdout=fh, stderr=subprocess.STDOUT, check=True, timeout=3600)
    if not (IMAGES / base).is_file():
        shutil.copy(out / base, IMAGES / base)
    (rootfs / STAMP).write_text(stamp + "\n")
    return rootfs


class ImageAgent:
    """One role's image booted under systemd-nspawn, its agent run by systemd from the shipped unit."""

    def __init__(self, name: str, role: str, rootfs: Path, cfg: dict[str, Any], deployment_file: Path,
                 root: Path) -> None:
        self.name = name
        self.role = role
        self.unit = f"intellect-agent@{role}.service"
        self.rootfs = rootfs
        self.etc = root / f"{name}-etc"
        self.state = root / f"{name}-state"
        self.log_path = root / f"{name}.console.log"
        self.etc.mkdir(parents=True)
        self.state.mkdir(parents=True)
        shutil.copy(deployment_file, self.etc / "deployment.json")
        cfg = {**cfg, "role": role, "data_dir": "/var/lib/intellect"}
        cfg["chain"] = {**cfg["chain"], "deployment_file": "/etc/intellect/deployment.json"}
        (self.etc / f"{role}.yaml").write_text(yaml.safe_dump(cfg))
        (self.etc / f"{role}.env").write_text("OMP_NUM_THREADS=1\nPYTHONUNBUFFERED=1\n")
        self.proc: subprocess.Popen[bytes] | None = None

    # -- the container ------------------------------------------------------------------------------------------
    def start(self) -> ImageAgent:
        """Boot the image (once: after a kill, systemd restarts the agent by itself)."""
        if self.proc is not None:
            return self
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child
        self.proc = subprocess.Popen(
            ["systemd-nspawn", "--quiet", "--register=no", "--keep-unit", "--directory", str(self.rootfs),
             "--volatile=overlay", "--machine", self.name, "--bind-ro", f"{self.etc}:/etc/intellect",
             "--bind", f"{self.state}:/var/lib/intellect", "--console=read-only", "--boot"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        return self

    def leader(self) -> int | None:
        """The container's PID 1 (its systemd) as the host sees it."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True).stdout.split()
        return int(out[0]) if out else None

    def inside(self, *cmd: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        """Run `cmd` in the container (all its namespaces: its systemd answers systemctl and journalctl)."""
        pid = self.leader()
        if pid is None:
            raise RuntimeError(f"{self.name}: the container is not running")
        return subprocess.run(["nsenter", "--target", str(pid), "--all", *cmd], capture_output=True, text=True,
                              timeout=timeout)

    def unit_props(self, *names: str) -> dict[str, str]:
        out = self.inside("systemctl", "show", self.unit, *(f"--property={n}" for n in names)).stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    # -- what AgentProc answers ---------------------------------------------------------------------------------
    @property
    def data_dir(self) -> Path:
        return self.state

    def status(self) -> dict[str, Any] | None:
        return roles_helpers().status_at(self.state)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def main_pid(self) -> int:
        """The agent's PID inside the container (0 while systemd has none running)."""
        try:
            return int(self.unit_props("MainPID").get("MainPID", "0"))
        except (RuntimeError, ValueError):
            return 0

    def kill9(self) -> int:
        """SIGKILL the agent (as the OOM killer or a crash would); systemd is left to restart it. Returns the
        killed PID (inside the container)."""
        pid = self.main_pid()
        if not pid:
            props = self.unit_props("ActiveState", "SubState", "Result", "ExecMainStatus", "NRestarts")
            raise AssertionError(f"{self.name}: no agent running to kill: {props}\n{self.journal(60)}")
        done = self.inside("sh", "-c", f"kill -KILL {pid}")  # the shell's kill: minbase has no procps
        assert done.returncode == 0, f"{self.name}: kill -KILL {pid}: {done.stderr.strip()}"
        return pid

    def stop(self, timeout: float = 120.0) -> int | None:
        """`systemctl stop` the unit (SIGTERM: the agent finishes its step and exits), then halt the container.
        Returns the agent's exit status (None when it never ran)."""
        if self.proc is None:
            return None
        status: int | None = None
        if self.alive():
            try:
                self.inside("systemctl", "stop", self.unit, timeout=timeout + 30)
                props = self.unit_props("ExecMainStatus", "ExecMainCode")
                status = int(props.get("ExecMainStatus", "-1")) if props.get("ExecMainCode") == "1" else -1
            except (RuntimeError, subprocess.TimeoutExpired):
                status = -1
            (self.state.parent / f"{self.name}.journal.log").write_text(self.journal())
            self.proc.send_signal(signal.SIGTERM)  # nspawn halts the container
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        return status

    def journal(self, lines: int | None = None) -> str:
        try:
            cmd = ["journalctl", "--no-pager", "-o", "short-monotonic", "-u", self.unit]
            return self.inside(*cmd, *(["-n", str(lines)] if lines else [])).stdout
        except (RuntimeError, subprocess.TimeoutExpired):
            saved = self.state.parent / f"{self.name}.journal.log"
            return saved.read_text() if saved.is_file() else ""

    def log_text(self) -> str:
        console = self.log_path.read_text(errors="replace") if self.log_path.is_file() else ""
        return console + "\n--- journal ---\n" + self.journal(200)


def wait_for(pred: Any, timeout: float, what: str, interval: float = 2.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
