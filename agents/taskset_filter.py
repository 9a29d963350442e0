"""`intellect taskset filter`: INTELLECT-2's offline difficulty filter, run with a real model.

    intellect taskset filter train.jsonl --model smollm2 -k 8 --low 0.1 --high 0.8 -o train-filtered.jsonl

k completions per problem from a base model (prompted as the pool's workers prompt: the task, the
thinking-budget suffix for --max-tokens, the model's chat template when it has one); problems whose
solve rate lies in [low, high] are kept with their rate in `difficulty` (INTELLECT-2 kept 0.1..0.8 of
what its base model solved, dropping problems that teach nothing: always or never solved). Mounted
under `intellect taskset` lazily (`intellect.verifier.tasksets_cli.LAZY`): it needs torch.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from intellect.agents.models import smollm2_dir, tiny_model_dir
from intellect.agents.tasks import filter_by_difficulty, select_by_rate
from intellect.verifier.prompts import prompt_text
from intellect.verifier.tasks import TaskSet, TaskSetError

__all__ = ["filter_command", "nothing_kept_message", "resolve_model"]


def resolve_model(name: str) -> Path:
    """`smollm2` (SmolLM2-135M-Instruct, offline), `tiny` (the random test model) or an HF model dir."""
    if name == "smollm2":
        return smollm2_dir()
    if name == "tiny":
        return tiny_model_dir()
    path = Path(name)
    if not (path / "config.json").is_file():
        raise click.BadParameter(f"{name!r} is not 'smollm2', 'tiny' or an HF model directory", param_hint="--model")
    return path


def nothing_kept_message(rates: dict[str, float], low: float, high: float, samples: int, model: str) -> str:
    """Why a difficulty filter kept no problem, from the solve rates it measured, and what to try."""
    n = len(rates)
    never = sum(1 for r in rates.values() if r == 0)
    always = sum(1 for r in rates.values() if r == 1)
    below = sum(1 for r in rates.values() if r < low)
    above = sum(1 for r in rates.values() if r > high)
    mean = sum(rates.values()) / max(n, 1)
    head = (f"kept no task with solve rate in [{low}, {high}]: of {n} problems ({samples} samples each, mean solve "
            f"rate {mean:.3f}) {below} scored below {low} ({never} never solved) and {above} above {high} "
            f"({always} always solved)")
    if never == n:
        hint = (f"{model} solves none of them: this data set is too hard for it (a larger model, or an easier data "
                f"set such as `intellect taskset gym basic_arithmetic`; docs/tasksets.md)")
    elif always == n:
        hint = f"{model} solves every sample: the problems teach it nothing (harder problems)"
    elif below >= above:
        hint = f"most problems are below the band: lower --low (e.g. {min(low, 1 / samples):g}) or raise -k"
    else:
        hint = "most problems are above the band: raise --high"
    return f"{head}; {hint}"


@contextmanager
def _progress(description: str, total: int) -> Iterator[Callable[[int, int], None]]:
    """A progress display on stderr for `filter_by_difficulty`'s `progress` callback: a rich bar on a terminal;
    elsewhere (a log file, CI) a line at every tenth of the problems, with the elapsed seconds."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn, TimeRemainingColumn

    console = Console(stderr=True)
    t0, printed = time.perf_counter(), [0]
    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=console, transient=True,
                  disable=not console.is_terminal) as bar:
        task = bar.add_task(description, total=total)

        def report(done: int, total: int) -> None:
            bar.update(task, completed=done)
            tenth = done * 10 // max(total, 1)
            if not console.is_terminal and tenth > printed[0]:
                printed[0] = tenth
                click.echo(f"{description}: {done}/{total} problems scored ({time.perf_counter() - t0:.0f} s)",
                           err=True)

        yield report


@click.command("filter", short_help="Keep problems a base model solves sometimes (offline difficulty filter).")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--model", "model_name", required=True, help="smollm2 | tiny | an HF causal-LM directory.")
@click.option("-k", "--samples", type=click.IntRange(min=1), default=8, show_default=True,
              help="Completions per problem.")
@click.option("--low", type=click.FloatRange(0, 1), default=0.1, show_default=True, help="Lowest solve rate kept.")
@click.option("--high", type=click.FloatRange(0, 1), default=0.8, show_default=True, help="Highest solve rate kept.")
@click.option("--max-tokens", type=click.IntRange(min=1), default=128, show_default=True,
              help="Completion budget (stated in the prompt as the thinking budget).")
@click.option("--temperature", type=click.FloatRange(min=0, min_open=True), default=1.0, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True, help="Sampler seed (same seed, same rates).")
@click.option("--chat-template/--no-chat-template", default=True, show_default=True,
              help="Prompt in the model's chat template when it has one.")
@click.option("--device", default="cpu", show_default=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.option("--rates", "rates_out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write every problem's solve rate (JSON: id -> rate).")
def filter_command(path: Path, model_name: str, samples: int, low: float, high: float, max_tokens: int,
                   temperature: float, seed: int, chat_template: bool, device: str, output: Path,
                   rates_out: Path | None) -> None:
    """Score every problem of PATH with k samples of --model; write those with a solve rate in [low, high]."""
    from intellect.agents.engines import (  # deferred: torch (`intellect --help`)
        SamplingParams,
        TransformersEngine,
    )

    if low > high:
        raise click.BadParameter(f"--low {low} is above --high {high}", param_hint="--low")
    ts = TaskSet.load(path)
    engine = TransformersEngine(device=device)
    engine.load(resolve_model(model_name))
    tok = engine.tokenizer if chat_template else None
    params = SamplingParams(max_tokens=max_tokens, temperature=temperature, seed=seed, capture_proofs=False)
    with _progress(f"{path.name}: {samples} samples per problem", len(ts)) as report:
        _, rates = filter_by_difficulty(ts, engine, params, samples=samples, low=0.0, high=1.0,
                                        prompt_format=lambda t: prompt_text(t, max_tokens, tokenizer=tok),
                                        progress=report)
    if rates_out is not None:  # written whatever is kept: the rates are what says why
        rates_out.write_text(json.dumps(rates, indent=1, sort_keys=True))
    try:
        kept = select_by_rate(ts, rates, low, high)
    except TaskSetError:
        raise TaskSetError(nothing_kept_message(rates, low, high, samples, model_name)) from None
    kept.save(output)
    mean = sum(rates.values()) / len(rates)
    click.echo(f"{output}: kept {len(kept)}/{len(ts)} tasks with solve rate in [{low}, {high}] "
               f"({samples} samples each; mean solve rate {mean:.3f})")
