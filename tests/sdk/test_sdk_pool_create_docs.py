"""docs/tasksets.md's "A pool with rules" example, run as written on a devnet (issue 37: it reverted with
`TaskLedgerUnbondingTooShort` because its `--window 86400` plus the default vote period and lease outlasted
the devnet's 1 h unbonding period); `pool create --help` names every option it cannot do without; a window
too long for the chain is refused before anything is sent, naming the options and the unbonding period."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from cli_runner import run_cli

from intellect.sdk.devnet import Devnet

DOC = Path(__file__).resolve().parents[2] / "docs" / "tasksets.md"


def _doc_commands() -> list[list[str]]:
    """The `intellect ...` commands of the code block that follows "## A pool with rules" (continuation lines
    joined, trailing comments dropped)."""
    text = DOC.read_text(encoding="utf-8").split("## A pool with rules", 1)[1]
    block: list[str] = []
    for line in text.splitlines()[1:]:
        if line.startswith("    "):
            block.append(line.strip())
        elif block:
            break
    joined = re.sub(r"\\\n", " ", "\n".join(block))
    return [shlex.split(ln, comments=True) for ln in joined.splitlines() if ln.strip()]


def _taskset(path: Path, name: str, n: int) -> None:
    lines = [json.dumps({"name": name, "schema": "intellect.taskset/v1"}, sort_keys=True)]
    lines += [json.dumps({"answer": str(i + 1), "id": f"{name}-{i}", "prompt": f"What is {i} + 1?", "source": "test",
                          "verifier": "math"}, sort_keys=True) for i in range(n)]
    path.write_text("\n".join(lines) + "\n")


def test_docs_pool_example_runs_on_the_devnet(net: Devnet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _taskset(tmp_path / "train.jsonl", "train", 6)
    _taskset(tmp_path / "mixed-heldout.jsonl", "held", 2)
    commands = _doc_commands()
    assert [c[:4] for c in commands][:2] == [["intellect", "--dev-account", "0", "pool"], ["intellect", "pool", "show", "2"]]
    chain = ["--network", net.url, "--deployment", str(net.deployment_file)]
    outs = []
    for cmd in commands:
        code, out, err = run_cli([*chain, *cmd[1:]])
        assert code == 0, f"{shlex.join(cmd)}: exit {code}\n{out}\n{err}"
        outs.append(out)
        if "--announce" in cmd:  # the defund is executable one lease duration (600 s on the devnet) later
            net.increase_time(net.protocol().pool(2).params.lease_duration + 1)
    created = outs[0].splitlines()
    assert created[0].startswith("pool 2 created: rules "), outs[0]  # plain lines, not a printed Python list
    assert not any(ln.startswith("[") for out in outs for ln in out.splitlines()), outs
    assert "budget 1000 INTL" in outs[0] and "budget 1400 INTL" in outs[5], outs
    assert outs[3].strip() == "pool 2: 2 INTL per attestation, 5 INTL per resolved challenge, budget 200 INTL", outs
    rules = json.loads(outs[1].split("\n", 1)[1])  # `pool show 2 --ipfs`: the rules the chain's CID names
    assert rules["length_alpha"] == 0.0003 and rules["group_size"] == 4
    params = net.protocol().pool(2).params
    assert (params.window_length, params.vote_period, params.lease_duration) == (300, 120, 600)
    # issue 37: the pool's state, and its owner finishing it (the unreserved budget goes back)
    code, out, err = run_cli([*chain, "pool", "state", "2"])
    assert code == 0 and out.strip() == "pool 2: open", out + err
    code, out, err = run_cli([*chain, "--dev-account", "0", "pool", "state", "2", "finish"])
    assert code == 0 and out.strip() == "pool 2: finished", out + err
    assert net.protocol().pool(2).budget == 0


def test_pool_create_help_names_the_required_options() -> None:
    code, out, _ = run_cli(["pool", "create", "--help"])
    assert code == 0
    # one entry per option: its line and the indented lines after it, joined
    entries: dict[str, str] = {}
    for line in out.splitlines():
        m = re.match(r"\s{2}(--[a-z-]+)", line)
        if m:
            current = m.group(1)
            entries[current] = line
        elif line.startswith(" " * 10) and entries:
            entries[current] += " " + line.strip()
    for opt in ("--taskset", "--model-family", "--group-size", "--problems-per-task", "--budget", "--length-alpha"):
        assert "required" in entries[opt].lower(), (opt, entries.get(opt))
    assert "required" not in entries["--temperature"].lower()


def test_pool_create_without_length_alpha_names_it(tmp_path: Path) -> None:
    code, out, err = run_cli(["pool", "create", "--dry-run", "--taskset", "bafkreigh2akiscaildcqabsyg3dfr6chu3fgpregiymsck7e7aqa4s52zy",
                              "--model-family", "tiny", "--group-size", "4", "--problems-per-task", "1",
                              "--budget", "cpu=64", "--ipfs", f"embedded:{tmp_path / 'ipfs'}"])
    assert code == 2 and "pool create needs --length-alpha" in out + err, out + err


def test_pool_create_timing_beyond_unbonding_refused_before_sending(net: Devnet, tmp_path: Path) -> None:
    _taskset(tmp_path / "t.jsonl", "t", 2)
    before = net.protocol().pool_count()
    code, out, err = run_cli(["--network", net.url, "--deployment", str(net.deployment_file), "--dev-account", "0",
                              "pool", "create", "--taskset", str(tmp_path / "t.jsonl"), "--model-family", "tiny",
                              "--group-size", "4", "--problems-per-task", "1", "--budget", "cpu=64",
                              "--length-alpha", "0", "--window", "86400", "--ipfs", f"embedded:{tmp_path / 'ipfs'}"])
    text = out + err
    assert code != 0 and "--lease 600 + --window 86400 + --vote-period 120 = 87120 s" in text, text
    assert "unbonding period, 3600 s" in text, text
    assert net.protocol().pool_count() == before
