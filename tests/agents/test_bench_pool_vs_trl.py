"""bench/grpo/pool_vs_trl.py's pure parts, without trl: argument parsing (`--dry-run`), the settings handed to
TRL's GRPOConfig, the verifier reward adapter TRL calls, and the table / summary built from the two curves.
With trl installed (`.venv-trl`, `make bench-trl`) one more test checks that TRL's own GRPOConfig accepts
those settings; it is skipped elsewhere."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

BENCH = Path(__file__).resolve().parents[2] / "bench" / "grpo" / "pool_vs_trl.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("pool_vs_trl", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["pool_vs_trl"] = module  # its dataclasses resolve their annotations through sys.modules
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop("pool_vs_trl", None)


def test_dry_run_parses_arguments_into_both_sides_settings(bench) -> None:
    result = CliRunner().invoke(bench.main, ["--dry-run", "--steps", "30", "--eval-every", "8", "--group-size", "4",
                                             "--prompts-per-step", "6", "--optimizer-steps", "3", "--lr", "1e-4",
                                             "--kl", "0.02", "--max-new-tokens", "12", "--no-proofs"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    cfg, trl = out["config"], out["trl_args"]
    assert cfg["steps"] == 30 and cfg["proofs"] is False and cfg["kl_coef"] == 0.02
    assert out["eval_steps"] == [0, 8, 16, 24, 30]  # the base model, every 8 rollout steps, and the last
    # one rollout step = 6 problems x 4 completions = 24 samples, in 3 optimizer updates of 8
    assert trl["per_device_train_batch_size"] == 8 and trl["steps_per_generation"] == 3
    assert trl["num_generations"] == 4 and trl["max_steps"] == 90
    assert trl["learning_rate"] == 1e-4 and trl["beta"] == 0.02 and trl["max_completion_length"] == 12
    assert trl["loss_type"] == "dr_grpo" and trl["lr_scheduler_type"] == "constant" and trl["delta"] == 4.0
    # by default TRL walks the pool side's problem sequence in order (the same problems at equal steps)
    assert cfg["trl_order"] == "pool" and trl["shuffle_dataset"] is False
    own = json.loads(CliRunner().invoke(bench.main, ["--dry-run", "--trl-order", "shuffled"]).output)
    assert own["trl_args"]["shuffle_dataset"] is True


def test_settings_that_cannot_split_into_optimizer_steps_are_refused(bench) -> None:
    result = CliRunner().invoke(bench.main, ["--dry-run", "--prompts-per-step", "5", "--group-size", "3",
                                             "--optimizer-steps", "2", "--problems-per-submission", "1"])
    assert result.exit_code != 0
    assert "not divisible by optimizer_steps" in str(result.exception)
    with pytest.raises(ValueError, match="group_size"):
        bench.BenchConfig(group_size=1)


def test_verifier_reward_scores_completions_like_the_pool(bench) -> None:
    from intellect.agents.tasks import synthetic_task_set

    tasks = synthetic_task_set(3, seed=5, max_operand=20, ops=("+",), name="t")
    reward = bench.verifier_reward(tasks)
    a, b = list(tasks)[:2]
    prompts = [a.prompt, a.prompt, b.prompt]
    completions = [f" {a.answer}", " 999", [{"role": "assistant", "content": f" {b.answer}"}]]
    assert reward(prompts, completions, task_id=[a.id, a.id, b.id], extra_column=[1, 2, 3]) == [1.0, 0.0, 1.0]
    with pytest.raises(KeyError, match="not in the training set"):
        reward([a.prompt], [" 1"], task_id=["nope"])
    with pytest.raises(ValueError, match="task ids"):
        reward([a.prompt], [" 1"], task_id=[a.id, b.id])


def _side(bench, name: str, rows: list[tuple[int, float, float, float]], per_step: int = 128,
          trained_share: float = 1.0):
    points = [bench.Point(step, step * per_step, wall, heldout=h, train=t,
                          trained=int(step * per_step * trained_share)) for step, wall, h, t in rows]
    return bench.SideResult(name, points, wall_s=rows[-1][1])


def test_table_and_summary(bench) -> None:
    pool = _side(bench, "pool", [(0, 0.0, 0.10, 0.10), (10, 20.0, 0.30, 0.50), (20, 40.0, 0.50, 0.90)])
    trl = _side(bench, "trl", [(0, 0.0, 0.10, 0.10), (10, 25.0, 0.40, 0.60), (20, 50.0, 0.45, 0.80)],
                trained_share=0.5)
    table = bench.build_table(pool, trl).splitlines()
    assert len(table) == 2 + 3
    assert table[3] == ("| 10 / 10 | 1280 / 1280 | 1280 / 640 | 0.300 | 0.400 | 0.500 | 0.600 | 20.0 | 25.0 "
                        "| 0.80 |")
    s = bench.summarize(pool, trl)
    assert s["tax_equal_samples"] == pytest.approx(40.0 / 50.0) and s["tax_equal_steps"] == pytest.approx(0.8)
    assert s["trained_pool"] == 2560 and s["trained_trl"] == 1280
    h = s["heldout"]
    assert h["target"] == pytest.approx(0.45)  # the best level both reach
    assert h["time_to_target_pool_s"] == 40.0 and h["time_to_target_trl_s"] == 50.0
    assert h["tax_to_target"] == pytest.approx(0.8) and h["final_diff"] == pytest.approx(0.05)
    assert s["train"]["target"] == pytest.approx(0.8) and s["train"]["samples_to_target_pool"] == 2560
    flat = _side(bench, "trl", [(0, 0.0, 0.10, 0.10), (10, 25.0, 0.10, 0.10), (20, 50.0, 0.05, 0.10)])
    assert bench.summarize(pool, flat)["heldout"]["target"] is None  # TRL learnt nothing: no common target


def test_table_at_equal_generated_takes_the_pools_last_checkpoint_within_trls_count(bench) -> None:
    # the pool refills: its steps generated 1.5x TRL's (192 vs 128 per step); checkpoints kept at steps 1, 2, 3, 4
    pool = _side(bench, "pool", [(0, 0.0, 0.1, 0.1), (1, 5.0, 0.2, 0.2), (2, 10.0, 0.3, 0.3), (3, 15.0, 0.4, 0.4),
                                 (4, 20.0, 0.5, 0.5)], per_step=192)
    trl = _side(bench, "trl", [(0, 0.0, 0.1, 0.1), (2, 8.0, 0.25, 0.25), (4, 16.0, 0.45, 0.45)])
    by_step = bench.build_table(pool, trl).splitlines()[2:]
    by_gen = bench.build_table(pool, trl, by="generated").splitlines()[2:]
    assert by_step[2].startswith("| 4 / 4 | 768 / 512 |") and "| 0.500 | 0.450 |" in by_step[2]
    # 512 generated by TRL: the pool's step 2 had 384, its step 3 already 576
    assert by_gen[2].startswith("| 2 / 4 | 384 / 512 |") and "| 0.300 | 0.450 |" in by_gen[2]
    assert by_gen[1].startswith("| 1 / 2 | 192 / 256 |")
    assert bench.pool_at_generated(pool.points, 100).step == 0
    assert bench.summarize(pool, trl)["tax_equal_samples"] == pytest.approx(10.0 / 16.0)
    with pytest.raises(ValueError, match="by must be"):
        bench.build_table(pool, trl, by="wall")


def test_signal_samples_counts_completions_in_groups_with_different_rewards(bench) -> None:
    ids = ["a"] * 3 + ["b"] * 3 + ["c"] * 3
    assert bench.signal_samples(ids, [1, 0, 0, 0, 0, 0, 1, 1, 1], 3) == 3  # only a's group has signal
    assert bench.signal_samples(ids, [1, 0, 0, 0, 1, 0, 1, 1, 0], 3) == 9
    # not laid out as consecutive groups: grouped by task id
    assert bench.signal_samples(["a", "b", "a", "b"], [1.0, 0.0, 0.0, 0.0], 2) == 2
    with pytest.raises(ValueError, match="rewards"):
        bench.signal_samples(["a"], [1.0, 0.0], 2)
    counts: dict[str, int] = {}
    from intellect.agents.tasks import synthetic_task_set

    tasks = synthetic_task_set(2, seed=5, max_operand=20, ops=("+",), name="t")
    a, b = list(tasks)
    reward = bench.verifier_reward(tasks, 2, counts)
    reward([a.prompt] * 4, [f" {a.answer}", " 999", " 998", " 997"], task_id=[a.id, a.id, b.id, b.id])
    assert counts == {"generated": 4, "signal": 2}
    record: list[dict] = []
    bench.verifier_reward(tasks, 2, None, record)([a.prompt] * 2, [f" {a.answer}", " 9"], task_id=[a.id, a.id],
                                                  completion_ids=[[5, 2], [7, 8, 9]])
    assert [(r["reward"], r["completion_ids"]) for r in record] == [(1.0, [5, 2]), (0.0, [7, 8, 9])]


def test_submission_files_keep_groups_whole(bench) -> None:
    from intellect.verifier.rollouts import RolloutMeta, RolloutRow

    def group(pid: str) -> list[RolloutRow]:
        return [RolloutRow(problem_id=pid, prompt_ids=[1, 2], completion_ids=[3], task_reward=float(i % 2),
                           length_penalty=0.0, reward=float(i % 2), advantage=0.0, policy_step=0,
                           worker="0x" + "b3" * 20) for i in range(2)]

    # p1 twice in the round: two claims in different passes of the epochs order (seed 3 of the filtered run)
    groups = [group(p) for p in ("p0", "p1", "p2", "p3", "p1", "p5")]
    meta = RolloutMeta(task_id="r", seed="0", model="m", worker="0x" + "b3" * 20, policy_step=0, group_size=2,
                       length_alpha=0.0)
    parts = bench.submission_files(meta, groups, 4)
    assert [len(p) for p in parts] == [8, 4]
    assert [p.meta.task_id for p in parts] == ["r-0", "r-1"]
    assert [r.problem_id for r in parts[1]] == ["p1", "p1", "p5", "p5"]
    with pytest.raises(ValueError, match="problems_per_submission"):
        bench.BenchConfig(prompts_per_step=6, problems_per_submission=4)


def test_trl_accepts_the_settings(bench, tmp_path: Path) -> None:
    pytest.importorskip("trl")
    from trl import GRPOConfig

    cfg = bench.BenchConfig(steps=3)
    args = GRPOConfig(output_dir=str(tmp_path), **cfg.trl_args())
    assert args.generation_batch_size == cfg.samples_per_step  # 16 problems x 8 completions per generation
    assert args.max_steps == 6 and args.delta == 4.0 and args.loss_type == "dr_grpo"


def test_trl_sampler_pool_needs_the_pools_problem_sequence(bench) -> None:
    out = json.loads(CliRunner().invoke(bench.main, ["--dry-run", "--trl-sampler", "pool"]).output)
    assert out["config"]["trl_sampler"] == "pool" and out["trl_args"]["shuffle_dataset"] is False
    assert json.loads(CliRunner().invoke(bench.main, ["--dry-run"]).output)["config"]["trl_sampler"] == "trl"
    result = CliRunner().invoke(bench.main, ["--dry-run", "--trl-sampler", "pool", "--trl-order", "shuffled"])
    assert result.exit_code != 0 and "use trl_order 'pool'" in str(result.exception)
    with pytest.raises(ValueError, match="trl_sampler"):
        bench.BenchConfig(trl_sampler="vllm")
    assert bench.round_seed(bench.BenchConfig(seed=3), 2) == 3 * 100003 + 2  # the pool side's base seed per round


def test_trl_with_the_pool_sampler_draws_the_pools_rounds_from_its_own_weights(bench, warm_dir: Path, learn_tasks,
                                                                                tmp_path: Path) -> None:
    """Common random numbers: TRL's round 0 is the pool side's round 0 token for token (same engine, prompts,
    base seed), and round 1 is what the pool's engine draws with that seed from TRL's weights after round 0."""
    pytest.importorskip("trl")
    from intellect.agents.engines import SamplingParams, TransformersEngine
    from intellect.verifier.submission import prompt_text

    cfg = bench.BenchConfig(model=str(warm_dir), steps=2, prompts_per_step=4, group_size=4, optimizer_steps=2,
                            max_new_tokens=6, eval_every=1, lr=1e-2, trl_sampler="pool", threads=1)
    side = bench.train_trl(cfg, warm_dir, learn_tasks, tmp_path / "trl")
    assert side.extra["sampler"] == "pool" and side.extra["generated"] == 32
    assert side.extra["trained"] > 0  # round 0 had groups with signal: TRL's weights moved
    rows = [json.loads(line) for line in (tmp_path / "trl" / "samples.jsonl").read_text().splitlines()]
    engine = TransformersEngine(warm_dir)
    params = SamplingParams(max_tokens=cfg.max_new_tokens, temperature=cfg.temperature, capture_proofs=False)

    def draws(b: int) -> list[list[int]]:
        problems = bench.round_problems(cfg, learn_tasks, b)
        prompts = [prompt_text(t, None, None) for t in problems for _ in range(cfg.group_size)]
        return [g.completion_ids for g in engine.generate(prompts, params.model_copy(
            update={"seed": bench.round_seed(cfg, b)}))]

    got = {b: [r["completion_ids"] for r in rows if r["call"] == b] for b in (0, 1)}
    assert [r["task_id"] for r in rows if r["call"] == 0] == \
        [t.id for t in bench.round_problems(cfg, learn_tasks, 0) for _ in range(cfg.group_size)]
    assert got[0] == draws(0)
    base_round1 = draws(1)
    engine.load(tmp_path / "trl" / "evals" / "round-1")  # TRL's weights after round 0's updates
    assert got[1] == draws(1) != base_round1  # drawn from those weights, not the base model's
    pool0 = bench.make_rollouts(TransformersEngine(warm_dir), bench.round_problems(cfg, learn_tasks, 0),
                                params.model_copy(update={"capture_proofs": True}), cfg.group_size, None,
                                policy_step=0, task_id="r", seed=bench.round_seed(cfg, 0),
                                problems_per_file=cfg.problems_per_submission)
    assert [list(r.completion_ids) for part in pool0 for r in part.rows] == got[0]  # the pool side's, proofs on


def test_length_alpha_is_pool_only(bench, tmp_path: Path) -> None:
    cfg = bench.BenchConfig(length_alpha=0.005, max_new_tokens=64)
    assert cfg.target_len == 64 and bench.BenchConfig().target_len is None  # the budget in every prompt, or none
    result = CliRunner().invoke(bench.main, ["--out", str(tmp_path / "o"), "--length-alpha", "0.005"])
    assert result.exit_code != 0 and "add --only pool" in result.output
    assert not (tmp_path / "o").exists()  # refused before anything ran
    with pytest.raises(ValueError, match="length_alpha"):
        bench.BenchConfig(length_alpha=-0.1)


def test_difficulty_filter_settings_are_checked(bench) -> None:
    with pytest.raises(ValueError, match="filter_low <= filter_high"):
        bench.BenchConfig(filter_samples=4, filter_low=0.9, filter_high=0.1)
    with pytest.raises(ValueError, match="filter_samples >= 0"):
        bench.BenchConfig(filter_samples=-1)
    with pytest.raises(ValueError, match="no better than a wrong one"):  # pool create's rule
        bench.BenchConfig(length_alpha=0.005, max_new_tokens=200)
    with pytest.raises(ValueError, match="problem_order"):
        bench.BenchConfig(problem_order="sorted")
    with pytest.raises(ValueError, match="trl_order"):
        bench.BenchConfig(trl_order="random")


def test_difficulty_filter_keeps_problems_by_the_base_models_solve_rate(bench) -> None:
    """Both sides train on what the filter keeps: each kept problem's rate (from the same prompts and sampler as
    the sides) lies in the range, and every dropped one's outside it."""
    from intellect.agents.models import tiny_model_dir
    from intellect.agents.tasks import synthetic_task_set

    train = synthetic_task_set(6, seed=0, max_operand=20, ops=("+",), name="train")
    cfg = bench.BenchConfig(model="tiny", filter_samples=3, filter_low=0.0, filter_high=0.5, threads=1,
                            max_new_tokens=4)
    kept, seen = bench.difficulty_filter(cfg, tiny_model_dir(), train)  # a random model: (nearly) never solved
    rates = seen["rates"]
    assert seen["candidates"] == 6 and seen["kept"] == len(kept) > 0 and set(rates) == {t.id for t in train}
    assert {t.id for t in kept} == {i for i, r in rates.items() if r <= 0.5}
    assert all(t.difficulty == rates[t.id] for t in kept)
    with pytest.raises(Exception, match="kept no task"):
        bench.difficulty_filter(bench.BenchConfig(model="tiny", filter_samples=3, filter_low=1.0, filter_high=1.0,
                                                  threads=1, max_new_tokens=4), tiny_model_dir(), train)


def test_difficulty_filter_cache_replays_the_rates_it_measured(bench, tmp_path: Path) -> None:
    """A second run with the same weights, prompts and sampler reads the stored rates (same kept set, no
    sampling); another sampler setting is another key; a stored file of another schema is refused by name."""
    import click

    from intellect.agents.models import tiny_model_dir
    from intellect.agents.tasks import synthetic_task_set

    train = synthetic_task_set(6, seed=0, max_operand=20, ops=("+",), name="train")
    cfg = bench.BenchConfig(model="tiny", filter_samples=3, filter_low=0.0, filter_high=0.5, threads=1,
                            max_new_tokens=4)
    cache = tmp_path / "filter-cache"
    kept, seen = bench.difficulty_filter(cfg, tiny_model_dir(), train, cache)
    assert seen["cache"].startswith("stored ") and len(list(cache.glob("*.json"))) == 1
    again, seen2 = bench.difficulty_filter(cfg, tiny_model_dir(), train, cache)
    assert seen2["cache"] == "hit " + seen["cache"].removeprefix("stored ")
    assert seen2["rates"] == seen["rates"] and [t.model_dump() for t in again] == [t.model_dump() for t in kept]
    other = bench.BenchConfig(model="tiny", filter_samples=3, filter_low=0.0, filter_high=0.5, threads=1,
                              max_new_tokens=5)
    assert bench.difficulty_filter(other, tiny_model_dir(), train, cache)[1]["cache"].startswith("stored ")
    assert len(list(cache.glob("*.json"))) == 2
    stored = Path(seen["cache"].removeprefix("stored "))
    stored.write_text(json.dumps({"schema": "intellect.bench.filter-rates/v0", "rates": {}}))
    with pytest.raises(click.ClickException, match="filter-rates/v0"):
        bench.difficulty_filter(cfg, tiny_model_dir(), train, cache)
    stored.write_text("{")
    with pytest.raises(click.ClickException, match="not JSON"):
        bench.difficulty_filter(cfg, tiny_model_dir(), train, cache)
    stored.write_text(json.dumps({"schema": bench.FILTER_CACHE_SCHEMA, "rates": {"a": "most"}}))
    with pytest.raises(click.ClickException, match="'rates' is not an object"):
        bench.difficulty_filter(cfg, tiny_model_dir(), train, cache)


def test_pool_side_rounds_take_the_networks_assignment(bench) -> None:
    """The pool side's problems are what the network's workers would be assigned: each round's submissions are
    consecutive ledger task ids under the pool rule `problem_order` (`assign_problems`). With `epochs`, the 20
    problems at 2 per claim make a pass of 10 claims = 2.5 rounds of 4: every problem exactly once in the first
    10 claims' 20 slots; with `random`, repeats within those 20 slots are allowed (and happen for this seed)."""
    import hashlib

    from intellect.agents.tasks import synthetic_task_set
    from intellect.verifier.tasks import assign_problems

    train = synthetic_task_set(20, seed=5, max_operand=20, ops=("+",), name="train")
    cfg = bench.BenchConfig(prompts_per_step=8, problems_per_submission=2)
    rounds = [bench.round_problems(cfg, train, b) for b in range(3)]
    assert [len(r) for r in rounds] == [8, 8, 8]
    claim_seed = hashlib.sha256(b"pool-vs-trl/0/6").digest()  # round 1, its second claim: id 6
    assert [t.id for t in rounds[1][2:4]] == [a.task_id for a in assign_problems(
        train, "epochs", seed=claim_seed, task_id=6, n=2, target_lengths=[1])]
    first_pass = [t.id for r in rounds for t in r][:18]  # task ids 1..9: slots 1..9 of pass 0
    assert len(set(first_pass)) == 18
    rnd = bench.BenchConfig(prompts_per_step=8, problems_per_submission=2, problem_order="random")
    drawn = [t.id for b in range(3) for t in bench.round_problems(rnd, train, b)][:18]
    assert len(set(drawn)) < 18


def test_adaptive_rounds_take_the_checkpoints_table(bench) -> None:
    """Under `adaptive` the pool side's rounds are drawn with the table of the checkpoint they are generated with
    (problems found never solved come back rarely); without a table (TRL's side) every problem weighs alike."""
    import hashlib

    from intellect.agents.tasks import synthetic_task_set
    from intellect.verifier.difficulty import COUNT_UNIT, DifficultyTable
    from intellect.verifier.tasks import assign_problems

    train = synthetic_task_set(20, seed=5, max_operand=20, ops=("+",), name="train")
    cfg = bench.BenchConfig(prompts_per_step=8, problems_per_submission=2, problem_order="adaptive")
    empty = DifficultyTable.empty(cfg.group_size)
    claim_seed = hashlib.sha256(b"pool-vs-trl/0/6").digest()
    assert [t.id for t in bench.round_problems(cfg, train, 1)[2:4]] == [a.task_id for a in assign_problems(
        train, "adaptive", seed=claim_seed, task_id=6, n=2, target_lengths=[1], difficulty=empty)]
    hard = DifficultyTable(group_size=cfg.group_size, counts={t.id: (32 * COUNT_UNIT, 0) for t in list(train)[:15]})
    drawn = [t.id for b in range(10) for t in bench.round_problems(cfg, train, b, hard)]
    assert sum(1 for i in drawn if i in hard.counts) < len(drawn) / 4  # 15 of 20 problems, drawn < 25 % of the time


def test_inference_runs_ahead_only_as_far_as_stays_fresh(bench) -> None:
    # async 2: round b waits until b - 2 rounds are in finished steps (their checkpoint is then the policy)
    assert bench.may_generate(2, done_rounds=0, async_level=2, trainer_starved=False)
    assert not bench.may_generate(3, done_rounds=0, async_level=2, trainer_starved=False)
    assert bench.may_generate(3, done_rounds=1, async_level=2, trainer_starved=False)
    # async 0: one round at a time, after the previous one's step
    assert bench.may_generate(0, done_rounds=0, async_level=0, trainer_starved=False)
    assert not bench.may_generate(1, done_rounds=0, async_level=0, trainer_starved=False)
    # a trainer refilling past more rounds than async_level waits on an empty queue: never a deadlock
    assert bench.may_generate(9, done_rounds=0, async_level=2, trainer_starved=True)


def test_a_no_refill_step_takes_its_round_and_at_least_min_signal_groups(bench) -> None:
    """Without the refill a batch is one round (4 submissions here), topped up while it has fewer groups with
    signal than `min_signal_groups`; with the refill, `prompts_per_step` groups with signal whatever the count."""
    plain = bench.BenchConfig(prompts_per_step=8, problems_per_submission=2, refill=False)
    assert not bench.batch_complete(plain, taken=3, signal=8) and bench.batch_complete(plain, taken=4, signal=0)
    floor = bench.BenchConfig(prompts_per_step=8, problems_per_submission=2, refill=False, min_signal_groups=3)
    assert not bench.batch_complete(floor, taken=4, signal=2) and not bench.batch_complete(floor, taken=3, signal=5)
    assert bench.batch_complete(floor, taken=4, signal=3) and bench.batch_complete(floor, taken=6, signal=3)
    refill = bench.BenchConfig(prompts_per_step=8, problems_per_submission=2)
    assert not bench.batch_complete(refill, taken=9, signal=7) and bench.batch_complete(refill, taken=2, signal=8)
    with pytest.raises(ValueError, match="add --no-refill"):
        bench.BenchConfig(min_signal_groups=2)
    with pytest.raises(ValueError, match="min_signal_groups must be in"):
        bench.BenchConfig(prompts_per_step=8, problems_per_submission=2, refill=False, min_signal_groups=9)
