"""The `intellect shardcast` click group, through CliRunner."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from click.testing import CliRunner
from shardcast_helpers import assert_same_tree

from intellect.sdk.shardcast import Manifest, Origin
from intellect.sdk.shardcast.cli import shardcast


def test_publish_no_serve_then_fetch_json_summary(tmp_path: Path, random_checkpoint: Path) -> None:
    runner = CliRunner()
    mf = tmp_path / "m.json"
    res = runner.invoke(shardcast, ["publish", str(random_checkpoint), "--step", "4", "--model-name", "tiny",
                                    "--data-dir", str(tmp_path / "o"), "--shard-size", "500000",
                                    "--manifest-out", str(mf), "--no-serve"])
    assert res.exit_code == 0, res.output
    info = json.loads(res.output.strip().splitlines()[-1])
    manifest = Manifest.from_bytes(mf.read_bytes())
    assert info["manifest_id"] == manifest.id and info["shards"] == len(manifest.shards) == 7
    # A later origin process serves what `publish --no-serve` sharded (the store reloads it).
    with Origin(tmp_path / "o") as origin:
        res = runner.invoke(shardcast, ["fetch", str(mf), str(tmp_path / "out"), "--relay", origin.url,
                                        "--json", "--no-progress"])
        assert res.exit_code == 0, res.output
        summary = json.loads(res.output.strip().splitlines()[-1])
        assert summary["downloaded_shards"] == 7 and summary["step"] == 4
        assert_same_tree(random_checkpoint, tmp_path / "out")
        # 'latest' asks the relay for its newest version and checks the manifest hashes to its id.
        res = runner.invoke(shardcast, ["fetch", "latest", str(tmp_path / "out2"), "--relay", origin.url,
                                        "--no-progress"])
        assert res.exit_code == 0, res.output
        assert_same_tree(random_checkpoint, tmp_path / "out2")


def test_publish_twice_then_fetch_with_base_takes_the_delta(tmp_path: Path, random_checkpoint: Path) -> None:
    runner = CliRunner()
    common = ["--data-dir", str(tmp_path / "o"), "--shard-size", "500000", "--no-serve"]
    res = runner.invoke(shardcast, ["publish", str(random_checkpoint), "--step", "1", "--model-name", "tiny", *common])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output.strip().splitlines()[-1])["delta_size"] is None
    step1 = tmp_path / "held-step-1"
    shutil.copytree(random_checkpoint, step1)
    weights = random_checkpoint / "model-00002-of-00002.safetensors"
    data = bytearray(weights.read_bytes())
    data[1000:1010] = bytes(10)  # step 2 changes a few bytes
    weights.write_bytes(bytes(data))
    mf = tmp_path / "m2.json"
    res = runner.invoke(shardcast, ["publish", str(random_checkpoint), "--step", "2", "--model-name", "tiny", *common,
                                    "--manifest-out", str(mf)])
    assert res.exit_code == 0, res.output
    info = json.loads(res.output.strip().splitlines()[-1])
    assert 0 < info["delta_size"] < 10_000  # a few changed bytes of a 3 MB checkpoint
    with Origin(tmp_path / "o") as origin:
        res = runner.invoke(shardcast, ["fetch", str(mf), str(tmp_path / "out"), "--relay", origin.url, "--json",
                                        "--no-progress", "--base", str(step1)])
        assert res.exit_code == 0, res.output
        summary = json.loads(res.output.strip().splitlines()[-1])
        assert summary["delta"] is True and summary["downloaded_bytes"] == info["delta_size"]
        assert_same_tree(random_checkpoint, tmp_path / "out")


def test_fetch_bad_manifest_file_reports_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "m.json"
    bad.write_text(json.dumps({"schema": "intellect.shardcast.manifest/v0"}))
    res = CliRunner().invoke(shardcast, ["fetch", str(bad), str(tmp_path / "out"), "--relay", "http://127.0.0.1:9"])
    assert res.exit_code == 1
    assert "manifest refused" in res.output and "manifest/v0" in res.output


def test_fetch_cid_without_ipfs_is_usage_error(tmp_path: Path) -> None:
    res = CliRunner().invoke(shardcast, ["fetch", "bafkreicysg23kiwv34eg2d7qweipxwosdo2py4ldv42nbauguluen5v6am",
                                         str(tmp_path / "out"), "--relay", "http://127.0.0.1:9"])
    assert res.exit_code == 2 and "--ipfs" in res.output


def test_publish_missing_checkpoint_is_usage_error(tmp_path: Path) -> None:
    res = CliRunner().invoke(shardcast, ["publish", str(tmp_path / "nope"), "--step", "1", "--model-name", "x",
                                         "--data-dir", str(tmp_path / "o"), "--no-serve"])
    assert res.exit_code == 2 and "does not exist" in res.output


def test_import_shardcast_pulls_no_torch() -> None:
    import subprocess
    import sys

    code = ("import sys, intellect.sdk.shardcast, intellect.sdk.shardcast.cli; "
            "bad = [m for m in ('torch', 'transformers', 'numpy') if m in sys.modules]; "
            "assert not bad, bad")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
