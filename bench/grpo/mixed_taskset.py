"""Write the mixed task set of the online-difficulty-filtering bench (issue 37; docs/benchmarks-grpo.md).

The tiny warm-started model's 64 `a + b` question problems (what its warm start can learn: `synthetic:64:0`)
mixed with 192 `a × b` problems of operands up to 99 it never solves, and 100 held-out `a + b` problems:

    .venv/bin/python bench/grpo/mixed_taskset.py --out runs/mixed
    .venv/bin/python bench/grpo/pool_vs_trl.py --only pool --problem-order adaptive --no-proofs --steps 30 \\
        --eval-every 10 --taskset runs/mixed/train.jsonl --eval-tasks runs/mixed/heldout.jsonl --out runs/mixed-adaptive

A pool that walks the whole set spends three quarters of its groups on problems with no signal; one that learns
which problems carry signal should not.
"""

from __future__ import annotations

from pathlib import Path

import click

from intellect.agents.tasks import synthetic_task_set
from intellect.agents.warmstart import WarmStartRecipe
from intellect.verifier.tasks import TaskSet


def mixed_sets(hard: int = 192, heldout: int = 100) -> tuple[TaskSet, TaskSet]:
    """(train, held-out): the warm start's 64 learnable problems then `hard` unsolvable ones; held-out `a + b`."""
    r = WarmStartRecipe()
    learn = synthetic_task_set(r.tasks, seed=r.task_seed, max_operand=r.max_operand, ops=("+",), name="learn")
    products = synthetic_task_set(hard, seed=11, max_operand=99, ops=("*",), name="hard")
    products = TaskSet([t.model_copy(update={"id": "hard-" + t.id}) for t in products], name="hard")
    train = TaskSet([*learn, *products], name=f"mixed-{len(learn)}-learnable-{hard}-hard")
    held = synthetic_task_set(heldout, seed=1, max_operand=20, ops=("+",), exclude_prompts=[t.prompt for t in learn],
                              name="heldout")
    return train, held


@click.command()
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True, help="Folder for the sets.")
@click.option("--hard", type=click.IntRange(min=0), default=192, show_default=True, help="Unsolvable problems.")
def main(out: Path, hard: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    train, held = mixed_sets(hard)
    train.save(out / "train.jsonl")
    held.save(out / "heldout.jsonl")
    click.echo(f"wrote {out / 'train.jsonl'} ({len(train)} problems) and {out / 'heldout.jsonl'} ({len(held)})")


if __name__ == "__main__":
    main()
