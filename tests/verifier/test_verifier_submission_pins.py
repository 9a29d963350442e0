"""The acceptance rule's pure parts pinned exactly (issue 39, mutmut's survivors on `verifier/submission.py`).

Each test pins one rule a mutant changed and no other test noticed: the declared hardware classes that count as
no GPU, GRPO's per-group normalisation (each group by its own mean; ε keeps a near-flat group small; float64
whatever the rewards' dtype) and its errors, the chat template applied exactly when the tokenizer has one, a
group whose texts and lengths disagree refused, advantages from float64 totals, and how a `Rejection` reads.

Then `check_submission` and its checks (`_check`) on real files of the tiny model (issue 39's fifth pass): the
stats and texts of each rejection, the evidence a verdict carries, `seconds`, the bounds at their limits (α within
1e-12, LLR at exactly `ambiguous_llr`, a reward exactly REWARD_TOL off), the seed's spelling, the pool's
temperature, chat template and length scope in the checks, the EOS ids of model and tokenizer, the aggregate and
the replay budget, a row only the math judge finds equal (its budget, its claims), a completion read without
its special tokens. The heavy imports sit at the top: mutmut's fork server imports this module once, so each
mutant's run starts with them loaded.
docs/benchmarks-security.md ("mutmut") lists the mutants.
"""

from __future__ import annotations

import copy
import hashlib
import math
import re
import time
from typing import Any

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from intellect.agents.engines import TransformersEngine
from intellect.agents.generate import generate_for_claim
from intellect.agents.models import tiny_model_dir
from intellect.agents.roles.canary import perturb
from intellect.agents.tasks import synthetic_task_set
from intellect.sdk import IntellectError
from intellect.verifier.evidence import MARGIN_EDGES, Component, EvidenceRules
from intellect.verifier.rewards import extract_answer
from intellect.verifier.rollouts import RolloutFile
from intellect.verifier.submission import (
    ADV_EPS,
    EVIDENCE_HIGH,
    REWARD_TOL,
    Checkpoint,
    Claim,
    Rejection,
    RejectReason,
    SubmissionRules,
    check_submission,
    group_advantages,
    hardware_class,
    prompt_text,
    score_group,
)
from intellect.verifier.tasks import Task, TaskSet, VerifierKind
from intellect.verifier.toploc import proofs_hash

TASK = Task(id="t", prompt="What is 2 + 3?", verifier=VerifierKind.MATH, answer="5")


@pytest.mark.parametrize(("gpu", "vram", "count"), [("", 24, 1), ("CPU", 80, 1), ("  cpu ", 80, 2), ("None", 48, 1)])
def test_hardware_class_a_gpu_model_of_cpu_none_or_empty_is_cpu_whatever_its_count(gpu: str, vram: int,
                                                                                   count: int) -> None:
    """A node that declares no GPU model (empty, `cpu`, `none`, any case and spacing) gets the cpu budgets even
    with a GPU count and VRAM set."""
    assert hardware_class(gpu, vram, count) == "cpu"
    assert hardware_class("RTX 4090", vram, count) != "cpu"  # the same numbers with a GPU model


def test_group_advantages_normalise_each_group_by_its_own_mean() -> None:
    """Two groups of different means (0.25 and 0.75, both of sample std 0.5): each is centred on its own mean,
    never on the batch's (0.5, which would move every advantage by ±0.5)."""
    adv = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0]]))
    d = 0.5 + ADV_EPS
    want = torch.tensor([[0.75 / d, -0.25 / d, -0.25 / d, -0.25 / d], [0.25 / d, 0.25 / d, 0.25 / d, -0.75 / d]])
    assert torch.allclose(adv, want, atol=1e-6), adv


def test_group_advantages_eps_keeps_a_near_flat_group_small() -> None:
    """Rewards 0 and 1e-6 (sample std 7.07e-7): (r − mean) / (std + ε) with ε = 1e-6 gives ±0.293, not the ±0.707
    of a plain z-score (nor a sign flip): float noise in a flat group does not become a full-size advantage."""
    assert ADV_EPS == 1e-6
    adv = group_advantages(torch.tensor([[0.0, 1e-6]], dtype=torch.float64))[0]
    want = 0.5e-6 / (math.sqrt(0.5e-12) + 1e-6)
    assert adv.tolist() == pytest.approx([-want, want], rel=1e-5)
    assert 0.29 < want < 0.3


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.int64])
def test_group_advantages_computed_in_float64_whatever_the_reward_dtype(dtype: torch.dtype) -> None:
    """bf16 or integer (0/1) rewards give the advantages of the same values in float64 (bf16 arithmetic would round
    the mean and std to 3 digits; an integer tensor has no mean at all)."""
    raw = torch.tensor([[1.0, 0.0, 0.0, 1.0, 1.0], [0.1, 0.2, 0.3, 0.7, 0.9]])
    rewards = raw.to(dtype)
    got = group_advantages(rewards)
    assert got.dtype == torch.float32
    assert torch.equal(got, group_advantages(rewards.to(torch.float64)))


def test_group_advantages_errors_name_the_shape_and_the_group_size() -> None:
    with pytest.raises(ValueError, match=re.escape("rewards must be (groups, n), got shape (4,)")):
        group_advantages(torch.zeros(4))
    with pytest.raises(ValueError, match=r"^a GRPO group needs at least 2 completions$"):
        group_advantages(torch.zeros(3, 1))


@pytest.fixture(scope="module")
def tiny_tokenizer() -> Any:
    from transformers import AutoTokenizer

    from intellect.agents.models import tiny_model_dir

    return AutoTokenizer.from_pretrained(str(tiny_model_dir()))


TEMPLATE = ("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}</{{ m['role'] }}>{% endfor %}"
            "{% if add_generation_prompt %}<assistant>{% endif %}")


def test_prompt_text_is_the_chat_template_exactly_when_the_tokenizer_has_one(tiny_tokenizer: Any) -> None:
    """With a template: the task text (and its budget suffix) as the single user turn, the assistant turn opened.
    Without one (the tiny model's tokenizer, or a raw `tokenizers.Tokenizer` with no such attribute) or without a
    tokenizer: the bare text."""
    from tokenizers import Tokenizer

    from intellect.agents.models import tiny_model_dir

    bare = prompt_text(TASK, 64)
    assert bare.startswith(TASK.prompt) and bare != TASK.prompt  # the budget suffix
    assert tiny_tokenizer.chat_template is None
    assert prompt_text(TASK, 64, tokenizer=tiny_tokenizer) == bare
    raw = Tokenizer.from_file(str(tiny_model_dir() / "tokenizer.json"))
    assert not hasattr(raw, "chat_template") and prompt_text(TASK, 64, tokenizer=raw) == bare
    templated = type(tiny_tokenizer).from_pretrained(str(tiny_model_dir()))
    templated.chat_template = TEMPLATE
    assert prompt_text(TASK, 64, tokenizer=templated) == f"<user>{bare}</user><assistant>"
    assert prompt_text(TASK, tokenizer=templated) == f"<user>{TASK.prompt}</user><assistant>"


def test_score_group_refuses_texts_and_lengths_of_different_counts() -> None:
    """A group's completions and their token counts go together: one missing is an error, never a shorter group."""
    with pytest.raises(ValueError):
        score_group(TASK, [" 5", " 5", " 4"], [3, 3], 8, 0.01)
    with pytest.raises(ValueError):
        score_group(TASK, [" 5", " 4"], [3, 3, 3], 8, 0.01)


def test_score_group_advantages_come_from_float64_totals() -> None:
    """Two solved answers whose totals differ by 1e-9 (α = 1e-9, lengths 9 and 10 of target 10): one float32 at 1.0,
    but the advantages are those of the float64 totals (±5e-4, above REWARD_TOL), the shorter one below."""
    scored = score_group(TASK, [" 5", " 5"], [9, 10], 10, 1e-9)
    totals = [total for _, _, total, _ in scored]
    assert totals == [1.0 - 1e-9, 1.0]
    adv = [a for *_, a in scored]
    want = group_advantages(torch.tensor([totals], dtype=torch.float64))[0].tolist()
    assert adv == want and adv[0] < -1e-4 and adv[1] > 1e-4


def test_a_rejection_reads_as_its_reason_and_detail() -> None:
    """Its message is `reason: detail` (what a traceback or log line shows), its fields kept as given."""
    rej = Rejection(RejectReason.WRONG_SEED, "file seed 0x01 != claim seed 0x02")
    assert str(rej) == "wrong_seed: file seed 0x01 != claim seed 0x02"
    assert (rej.reason, rej.detail, rej.stats) == ("wrong_seed", "file seed 0x01 != claim seed 0x02", {})
    assert Rejection(RejectReason.BAD_FILE, "x", {"row": 1}).stats == {"row": 1}


# -- check_submission and its checks (`_check`) on a real file of the tiny model -----------------------------------

WORKER = "0x" + "11" * 20
SEED = bytes(range(32))
SID = 7
CID = "bafy-checkpoint-step-3"
RULES = SubmissionRules(problems_per_task=2, group_size=2, length_alpha=0.0003, temperature=1.0,
                        budgets={"cpu": [6]}, toploc_profile="fp32")


@pytest.fixture(scope="module")
def task_set() -> Any:
    return synthetic_task_set(16, seed=3, max_operand=9, ops=("+",), name="submission-test")


@pytest.fixture(scope="module")
def checkpoint() -> Checkpoint:
    d = tiny_model_dir()
    return Checkpoint(AutoModelForCausalLM.from_pretrained(str(d)).eval(), AutoTokenizer.from_pretrained(str(d)), CID)


@pytest.fixture(scope="module")
def engine() -> TransformersEngine:
    return TransformersEngine(tiny_model_dir())


def _generate(engine: TransformersEngine, task_set: Any, rules: SubmissionRules = RULES, seed: bytes = SEED,
              **kw: Any) -> RolloutFile:
    return generate_for_claim(engine, task_set, seed, task_id=SID, problems=rules.problems_per_task,
                              budgets=rules.budgets["cpu"], group_size=rules.group_size,
                              temperature=rules.temperature, length_alpha=rules.length_alpha, policy_step=3,
                              worker=WORKER, model=CID, length_scope=rules.length_scope, **kw)


@pytest.fixture(scope="module")
def honest(engine: TransformersEngine, task_set: Any) -> RolloutFile:
    return _generate(engine, task_set)


def _claim(rf: RolloutFile, **over: Any) -> Claim:
    fields: dict[str, Any] = {
        "submission_id": SID, "node": WORKER, "policy_step": rf.meta.policy_step,
        "proofs_hash": "0x" + proofs_hash([p for r in rf.rows for p in r.proofs]).hex(),
        "work_units": sum(len(r.completion_ids) for r in rf.rows), "rollouts_cid": "bafk-rollouts",
        "seed": lambda: bytes.fromhex(rf.meta.seed.removeprefix("0x")), "budget_class": lambda: "cpu",
    }
    return Claim(**(fields | over))


def _verdict(rf: RolloutFile, task_set: Any, checkpoint: Checkpoint, rules: SubmissionRules = RULES,
             **kw: Any) -> Any:
    return check_submission(rf.to_bytes(), _claim(rf), task_set, rules, lambda step: checkpoint, **kw)


def _edit(rf: RolloutFile, row: int, **changes: Any) -> RolloutFile:
    rows = list(rf.rows)
    rows[row] = rows[row].model_copy(update=changes)
    return RolloutFile(rf.meta, rows)


def _with_meta(rf: RolloutFile, **changes: Any) -> RolloutFile:
    return RolloutFile(rf.meta.model_copy(update=changes), rf.rows)


def test_an_accepted_submissions_stats_are_its_rows_tokens_and_rewards(honest: RolloutFile, task_set: Any,
                                                                      checkpoint: Checkpoint) -> None:
    """Exactly: the rows, the paid tokens, the largest reward difference (0: the validator recomputed the same
    rewards), the mean reward and the math judge's use for the whole submission."""
    v = _verdict(honest, task_set, checkpoint)
    assert v.outcome == "accept" and v.accepted and v.reason is None and v.detail == ""
    rows = honest.rows
    assert v.stats == {"rows": 4, "tokens": sum(len(r.completion_ids) for r in rows), "max_reward_diff": 0.0,
                       "mean_reward": sum(r.reward for r in rows) / 4,
                       "math_judge": {"invocations": 0, "fuel_used": 0, "cpu_used_s": 0.0, "outcomes": {}}}


def test_the_largest_reward_difference_is_reported_under_the_tolerance(honest: RolloutFile, task_set: Any,
                                                                       checkpoint: Checkpoint) -> None:
    """A reward 0.5·REWARD_TOL off (accepted) is the submission's `max_reward_diff`, not 1 or 0."""
    r0 = honest.rows[0]
    moved = _edit(honest, 0, advantage=r0.advantage + 0.5 * REWARD_TOL)
    v = _verdict(moved, task_set, checkpoint)
    assert v.accepted, v.detail
    assert v.stats["max_reward_diff"] == pytest.approx(0.5 * REWARD_TOL, rel=1e-6)


def test_check_submission_seconds_is_the_time_the_check_took(honest: RolloutFile, task_set: Any,
                                                             checkpoint: Checkpoint) -> None:
    """`seconds` of an accepted, a rejected and an ambiguous verdict: positive, at most the call's own time."""
    cases = [
        (honest.to_bytes(), _claim(honest), None),
        (honest.to_bytes(), _claim(honest, node="0x" + "22" * 20), None),
        (honest.to_bytes(), _claim(honest), _upside_down(ambiguous_llr=1e-9)),
    ]
    outcomes = []
    for data, claim, ev in cases:
        t0 = time.perf_counter()
        v = check_submission(data, claim, task_set, RULES, lambda step: checkpoint, evidence=ev)
        took = time.perf_counter() - t0
        assert 0.0 < v.seconds <= took, (v.outcome, v.seconds, took)
        outcomes.append(v.outcome)
    assert outcomes == ["accept", "reject", "ambiguous"]


def test_a_rejection_found_after_the_replay_carries_the_replays_evidence(honest: RolloutFile, task_set: Any,
                                                                        checkpoint: Checkpoint) -> None:
    """A reward mismatch is found after the replay: its verdict carries the same LLR and observations as the honest
    file's (the same proofs and tokens). A rejection before the replay (another worker) carries none."""
    ok = _verdict(honest, task_set, checkpoint)
    r0 = honest.rows[0]
    bad = _verdict(_edit(honest, 0, task_reward=1.0 - r0.task_reward, reward=1.0 - r0.task_reward - r0.length_penalty),
                   task_set, checkpoint)
    assert (bad.outcome, bad.reason) == ("reject", "reward_mismatch")
    assert ok.llr is not None and ok.observations is not None
    assert (bad.llr, bad.observations) == (ok.llr, ok.observations)
    early = check_submission(honest.to_bytes(), _claim(honest, node="0x" + "22" * 20), task_set, RULES,
                             lambda step: checkpoint)
    assert (early.reason, early.llr, early.observations) == ("wrong_worker", None, None)


def test_a_reward_mismatch_names_the_row_and_both_rewards(honest: RolloutFile, task_set: Any,
                                                          checkpoint: Checkpoint) -> None:
    """The stats of a reward mismatch: the row in its group, the problem, the claimed and the recomputed rewards."""
    r1 = honest.rows[1]
    v = _verdict(_edit(honest, 1, advantage=r1.advantage + 0.5), task_set, checkpoint)
    assert (v.reason, v.detail) == ("reward_mismatch", f"problem {r1.problem_id} row 1: ['advantage'] differ from "
                                                       "recomputed")
    assert v.stats == {"row": 1, "problem": r1.problem_id,
                       "claimed": {"task_reward": r1.task_reward, "reward": r1.reward, "advantage": r1.advantage + 0.5},
                       "recomputed": {"task_reward": r1.task_reward, "reward": r1.reward, "advantage": r1.advantage}}


def test_a_work_units_mismatch_names_both_counts(honest: RolloutFile, task_set: Any, checkpoint: Checkpoint) -> None:
    tokens = sum(len(r.completion_ids) for r in honest.rows)
    v = check_submission(honest.to_bytes(), _claim(honest, work_units=tokens + 1), task_set, RULES,
                         lambda step: checkpoint)
    assert (v.reason, v.detail) == ("work_units_mismatch", f"{tokens} tokens generated, {tokens + 1} units claimed")
    assert v.stats == {"tokens": tokens, "claimed": tokens + 1}


def test_wrong_problems_name_the_files_and_the_assigned_ones(honest: RolloutFile, task_set: Any,
                                                             checkpoint: Checkpoint) -> None:
    v = _verdict(honest, task_set, checkpoint, RULES.model_copy(update={"budgets": {"cpu": [5]}}))
    got = [(honest.rows[0].problem_id, 6), (honest.rows[2].problem_id, 6)]
    want = [(pid, 5) for pid, _ in got]
    assert (v.reason, v.stats) == ("wrong_problems", {"got": got, "assigned": want})
    assert v.detail == f"problems/target lengths {got} != assigned {want}"


def test_a_completion_end_error_names_its_row_problem_and_tokens(honest: RolloutFile, task_set: Any,
                                                                 checkpoint: Checkpoint) -> None:
    """A token after EOS (the tiny model's EOS is 0) in the second row of the second group: `row` is the row in its
    group, `tokens` the row's length."""
    r3 = honest.rows[3]
    ids = [0, *r3.completion_ids[1:]]
    v = _verdict(_edit(honest, 3, completion_ids=ids), task_set, checkpoint)
    assert v.reason == "tokens_after_eos"
    assert v.detail.startswith(f"problem {r3.problem_id} row 1: ")
    assert v.stats == {"row": 1, "problem": r3.problem_id, "tokens": len(ids)}


def test_a_failing_rows_stats_name_the_row_its_chunk_and_the_failed_rows(honest: RolloutFile, task_set: Any,
                                                                          checkpoint: Checkpoint) -> None:
    """Row 0 with row 2's proofs: the first failing row, its failed chunk's statistics (as in the detail), how many
    rows failed (1; then 2 with row 1's proofs swapped too) and the rows checked."""
    forged = _edit(honest, 0, proofs=list(honest.rows[2].proofs))
    v = _verdict(forged, task_set, checkpoint)
    assert v.reason.startswith("toploc_") and v.detail.startswith("row 0: chunk 0: "), v.detail
    chunk = v.stats["chunk"]
    assert set(chunk) == {"exp_mismatches", "mant_err_mean", "mant_err_median"}
    assert f"{chunk['exp_mismatches']} exponent mismatches, mantissa error mean {chunk['mant_err_mean']:.2f}" \
        in v.detail
    assert {k: v.stats[k] for k in ("row", "failed_chunk", "failed_rows", "rows")} == \
        {"row": 0, "failed_chunk": 0, "failed_rows": 1, "rows": 4}
    two = _verdict(_edit(forged, 1, proofs=list(honest.rows[3].proofs)), task_set, checkpoint)
    assert (two.stats["row"], two.stats["failed_rows"], two.stats["rows"]) == (0, 2, 4)


def test_a_row_failing_its_replay_names_the_chunk_of_its_worst_token(engine: TransformersEngine, task_set: Any,
                                                                     checkpoint: Checkpoint) -> None:
    """Row 0 sampled at temperature 3 in a file of temperature 1: its proofs hold (the same model, every chunk
    exact), its tokens are not the pool's sampler's; the failure names the chunk of the worst token."""
    rules = RULES.model_copy(update={"budgets": {"cpu": [16]}})
    hot = _generate(engine, task_set, rules.model_copy(update={"temperature": 3.0}))
    cold = _generate(engine, task_set, rules)
    v = _verdict(RolloutFile(cold.meta, [hot.rows[0], *cold.rows[1:]]), task_set, checkpoint, rules)
    assert v.reason == "toploc_replay_mismatch", v.detail
    assert v.stats == {"row": 0, "failed_chunk": 0, "failed_rows": 1, "rows": 4,
                       "chunk": {"exp_mismatches": 0, "mant_err_mean": 0.0, "mant_err_median": 0.0}}


def test_a_row_failing_before_its_chunks_are_judged_has_no_chunk(honest: RolloutFile, task_set: Any,
                                                                 checkpoint: Checkpoint) -> None:
    """Row 2 without its proof (a file may omit proofs; TOPLOC then has none for its tokens): a wrong proof count,
    no chunk judged, none named."""
    v = _verdict(_edit(honest, 2, proofs=[]), task_set, checkpoint)
    assert v.reason == "toploc_wrong_proof_count", v.detail
    assert v.stats == {"row": 2, "failed_chunk": None, "chunk": None, "failed_rows": 1, "rows": 4}


def test_a_malformed_proof_names_its_index_and_no_chunk(honest: RolloutFile, task_set: Any,
                                                        checkpoint: Checkpoint) -> None:
    """Row 2's proof with modulus 0 (the file's shape holds, the proof cannot be decoded): its index, no statistics."""
    r2 = honest.rows[2]
    v = _verdict(_edit(honest, 2, proofs=[b"\x00\x00" + r2.proofs[0][2:]]), task_set, checkpoint)
    assert v.reason == "toploc_malformed_proof", v.detail
    assert v.stats == {"row": 2, "failed_chunk": 0, "chunk": None, "failed_rows": 1, "rows": 4}


def test_the_replay_uses_the_pools_temperature(honest: RolloutFile, task_set: Any, checkpoint: Checkpoint) -> None:
    """The honest file (sampled at T = 1) checked under a pool temperature of 1.05: one of its 24 tokens is not the
    seeded sampler's draw at 1.05 (within the per-token tolerance), and the fp32 profile allows none."""
    v = _verdict(honest, task_set, checkpoint, RULES.model_copy(update={"temperature": 1.05}))
    assert v.reason == "toploc_replay_differing", v.detail
    assert v.detail.startswith("1 of 24 completion tokens differ from the seeded sampler's draw by more than 0.0 "
                               "(allowed 0;")
    assert v.stats == {"rows": 4}


def test_small_deviations_on_every_row_fail_the_aggregate(task_set: Any, checkpoint: Checkpoint) -> None:
    """A file from the checkpoint with 3 % weight noise, under the `mixed` profile: every chunk within the per-chunk
    bounds, their mean mantissa error over the submission's 8 chunks above 2.5."""
    rules = RULES.model_copy(update={"problems_per_task": 4, "toploc_profile": "mixed"})
    other = TransformersEngine(tiny_model_dir())
    perturb(other.model, 0.03, seed=11)
    v = _verdict(_generate(other, task_set, rules), task_set, checkpoint, rules)
    assert v.reason == "toploc_aggregate_mantissa", v.detail
    assert v.detail.endswith("over the submission's 8 chunks > 2.5")
    assert v.stats == {"rows": 8}


def test_the_seed_may_be_written_with_0x_and_in_upper_case(honest: RolloutFile, task_set: Any,
                                                           checkpoint: Checkpoint) -> None:
    assert honest.meta.seed == SEED.hex()
    v = _verdict(_with_meta(honest, seed="0x" + SEED.hex().upper()), task_set, checkpoint)
    assert v.accepted, v.detail


def test_length_alpha_may_differ_by_1e_12_and_no_more(honest: RolloutFile, task_set: Any,
                                                      checkpoint: Checkpoint) -> None:
    """The pool's α = 0 and the file's 1e-12 (exactly 1e-12 apart) are the same α; 3e-12 is another. (The tiny
    model's rows are unsolved: no length penalty whatever α.)"""
    rules = RULES.model_copy(update={"length_alpha": 0.0})
    assert _verdict(_with_meta(honest, length_alpha=1e-12), task_set, checkpoint, rules).accepted
    v = _verdict(_with_meta(honest, length_alpha=3e-12), task_set, checkpoint, rules)
    assert (v.reason, v.detail) == ("wrong_length_alpha", "length alpha 3e-12 != 0.0")


def test_rules_without_budgets_for_the_class_are_an_error_not_a_rejection(honest: RolloutFile, task_set: Any,
                                                                          checkpoint: Checkpoint) -> None:
    """The pool's own rules cannot be applied: the validator's error, never a verdict against the worker."""
    rules = RULES.model_copy(update={"budgets": {"gpu-large": [6]}})
    with pytest.raises(IntellectError) as err:
        _verdict(honest, task_set, checkpoint, rules)
    assert str(err.value) == ("the pool rules cannot be applied: tasks.budgets has no entry for hardware class "
                              "'cpu' (nor 'cpu')")


def test_the_checkpoint_loaded_is_the_files_policy_step(honest: RolloutFile, task_set: Any,
                                                        checkpoint: Checkpoint) -> None:
    steps: list[int] = []

    def load(step: int) -> Checkpoint:
        steps.append(step)
        return checkpoint

    assert check_submission(honest.to_bytes(), _claim(honest), task_set, RULES, load).accepted
    assert steps == [3]


def test_prompts_are_the_chat_template_when_the_pool_says_model(engine: TransformersEngine, honest: RolloutFile,
                                                                task_set: Any, checkpoint: Checkpoint) -> None:
    """With a tokenizer that has a chat template: a file of templated prompts is accepted under `model` and refused
    under `none`; the bare-text file the other way round."""
    tok = type(checkpoint.tokenizer).from_pretrained(str(tiny_model_dir()))
    tok.chat_template = TEMPLATE
    templated_ckpt = Checkpoint(checkpoint.model, tok, CID)
    model_rules = RULES.model_copy(update={"chat_template": "model"})
    templated = _generate(engine, task_set, model_rules, tokenizer=tok)
    assert templated.rows[0].prompt_ids != honest.rows[0].prompt_ids
    assert _verdict(templated, task_set, templated_ckpt, model_rules).accepted
    assert _verdict(templated, task_set, templated_ckpt).reason == "wrong_prompt"
    assert _verdict(honest, task_set, templated_ckpt, model_rules).reason == "wrong_prompt"
    assert _verdict(honest, task_set, templated_ckpt).accepted


EARLY_EOS_SEED = hashlib.sha256(b"23").digest()
"""A claim seed under which the tiny model ends row 0 with its EOS after 18 of 32 tokens (the others run to 32)."""


@pytest.fixture(scope="module")
def early_eos(engine: TransformersEngine, task_set: Any) -> RolloutFile:
    rules = RULES.model_copy(update={"length_scope": "all", "length_alpha": 0.05, "budgets": {"cpu": [32]}})
    rf = _generate(engine, task_set, rules, seed=EARLY_EOS_SEED)
    assert [len(r.completion_ids) for r in rf.rows] == [18, 32, 32, 32] and rf.rows[0].completion_ids[-1] == 0
    return rf


def test_the_length_penalty_is_checked_with_the_pools_target_alpha_and_scope(early_eos: RolloutFile, task_set: Any,
                                                                             checkpoint: Checkpoint) -> None:
    """`length_scope="all"` (pools whose rules predate the field): row 0, unsolved, 14 tokens under its target of 32,
    carries a length penalty, and the file is checked with the pool's target, α and scope: under `solved` (no
    penalty on unsolved rows) or another α the same file is refused."""
    rules = RULES.model_copy(update={"length_scope": "all", "length_alpha": 0.05, "budgets": {"cpu": [32]}})
    lp = [r.length_penalty for r in early_eos.rows]
    assert lp[0] > 0.0 and lp[1:] == [0.0, 0.0, 0.0]
    assert early_eos.rows[0].advantage < 0.0 < early_eos.rows[1].advantage
    v = _verdict(early_eos, task_set, checkpoint, rules)
    assert v.accepted, v.detail
    assert v.stats["mean_reward"] == pytest.approx(-lp[0] / 4, rel=1e-9)
    for other in ({"length_scope": "solved"}, {"length_alpha": 0.06}):
        v = _verdict(_with_meta(early_eos, length_alpha=rules.model_copy(update=other).length_alpha), task_set,
                     checkpoint, rules.model_copy(update=other))
        assert (v.reason, v.stats["row"]) == ("reward_mismatch", 0), (other, v.detail)


def test_a_reward_exactly_reward_tol_off_is_accepted_and_the_next_float32_refused(engine: TransformersEngine,
                                                                                    task_set: Any,
                                                                                    checkpoint: Checkpoint) -> None:
    """The tolerance is inclusive. The file stores rewards as float32, and 1e-4 is no difference of two float32
    values, so the bound is reached through the recomputed (float64) length penalty: row 0 of the early-EOS file
    (14 tokens under its target, scope `all`) under α = (L − REWARD_TOL) / 14 with L = float32(1.2e-4) has a
    recomputed penalty of exactly L − REWARD_TOL. Written as L (reward −L): exactly REWARD_TOL off in both, accepted;
    the next float32 above L is refused naming both."""
    big = float(np.float32(1.2e-4))
    alpha = (big - REWARD_TOL) / 14
    assert alpha * 14 == big - REWARD_TOL and abs(big - alpha * 14) == REWARD_TOL
    rules = RULES.model_copy(update={"length_scope": "all", "length_alpha": alpha, "budgets": {"cpu": [32]}})
    rf = _generate(engine, task_set, rules, seed=EARLY_EOS_SEED)
    assert len(rf.rows[0].completion_ids) == 18
    at = _verdict(_edit(rf, 0, length_penalty=big, reward=-big), task_set, checkpoint, rules)
    assert at.accepted and at.stats["max_reward_diff"] == REWARD_TOL, at.detail
    over = float(np.nextafter(np.float32(big), np.float32(1.0)))
    v = _verdict(_edit(rf, 0, length_penalty=over, reward=-over), task_set, checkpoint, rules)
    assert v.reason == "reward_mismatch" and "row 0: ['length_penalty', 'reward'] differ" in v.detail, v.detail


def test_the_eos_ids_are_the_models_generation_config_and_the_tokenizers(honest: RolloutFile, early_eos: RolloutFile,
                                                                         task_set: Any,
                                                                         checkpoint: Checkpoint) -> None:
    """A completion ends at either: with the model's generation config naming another EOS (a token row 0 holds
    mid-completion), that row has tokens after EOS; the tokenizer's EOS (0) still ends row 0 of `early_eos` when
    the model's config names only a token no row holds."""
    rules = RULES.model_copy(update={"length_scope": "all", "length_alpha": 0.05, "budgets": {"cpu": [32]}})
    other = copy.deepcopy(checkpoint.model)
    mid = honest.rows[0].completion_ids[2]
    other.generation_config.eos_token_id = [mid]
    v = _verdict(honest, task_set, Checkpoint(other, checkpoint.tokenizer, CID))
    assert (v.reason, v.stats["row"]) == ("tokens_after_eos", 0), v.detail
    absent = next(t for t in range(2, 512) if all(t not in r.completion_ids for r in early_eos.rows))
    other.generation_config.eos_token_id = absent
    assert _verdict(early_eos, task_set, Checkpoint(other, checkpoint.tokenizer, CID), rules).accepted


JUDGED_SEED = hashlib.sha256(b"n0").digest()
"""A claim seed under which row 3 (problem arith-1-s3's second completion, 32 tokens) ends its text in the number 1."""


@pytest.fixture(scope="module")
def judged_tasks(task_set: Any) -> TaskSet:
    """The task set with arith-1-s3's answer written `2-1`: row 3's 1 equals it only by the math judge (not a plain
    number comparison). The same ids and prompts: the same assignment and the same completions."""
    return TaskSet([t.model_copy(update={"answer": "2-1"}) if t.id == "arith-1-s3" else t for t in task_set],
                   name=task_set.name)


@pytest.fixture(scope="module")
def judged(engine: TransformersEngine, judged_tasks: TaskSet) -> RolloutFile:
    rf = _generate(engine, judged_tasks, RULES.model_copy(update={"budgets": {"cpu": [32]}}), seed=JUDGED_SEED)
    assert [(r.problem_id, r.task_reward) for r in rf.rows][2:] == [("arith-1-s3", 0.0), ("arith-1-s3", 1.0)]
    return rf


def test_a_row_the_math_judge_compares_is_checked_with_the_submissions_judge(judged: RolloutFile,
                                                                             judged_tasks: TaskSet,
                                                                             checkpoint: Checkpoint) -> None:
    """Row 3 solved by the judge's EQUAL: accepted (its task reward 1 recomputed, not |1 + 1| off), and the judge's
    one call is the submission's budget's (the stats report it)."""
    v = _verdict(judged, judged_tasks, checkpoint, RULES.model_copy(update={"budgets": {"cpu": [32]}}))
    assert v.accepted, v.detail
    assert (v.stats["math_judge"]["invocations"], v.stats["math_judge"]["outcomes"]) == (1, {"equal": 1})
    assert v.stats["mean_reward"] == 0.25


def test_a_workers_claim_of_0_for_an_answer_the_judge_finds_equal_stands(judged: RolloutFile, judged_tasks: TaskSet,
                                                                         checkpoint: Checkpoint) -> None:
    """0 is what an unjudgeable comparison scores on a slow worker's machine: the validator's EQUAL cannot refute a
    claim of 0, so the row counts with it (its group flat: advantages 0) and the file is accepted."""
    claimed_0 = _edit(_edit(judged, 3, task_reward=0.0, reward=0.0, advantage=0.0), 2, advantage=0.0)
    v = _verdict(claimed_0, judged_tasks, checkpoint, RULES.model_copy(update={"budgets": {"cpu": [32]}}))
    assert v.accepted, v.detail
    assert v.stats["mean_reward"] == 0.0


PAD_SEED = hashlib.sha256(b"p377").digest()
"""A claim seed under which row 2 (problem arith-1-s3's first completion, 32 tokens) holds a special token inside the
number its text ends with: it reads 18 without the special tokens, 8 with them."""


def test_completions_are_scored_on_their_text_without_special_tokens(engine: TransformersEngine, task_set: Any,
                                                                     checkpoint: Checkpoint) -> None:
    """The worker decodes a completion without its special tokens, and so does the validator: with arith-1-s3's
    answer written 18, row 2 is solved on both sides and the file accepted (kept, the tokens would read 8)."""
    tasks = TaskSet([t.model_copy(update={"answer": "18"}) if t.id == "arith-1-s3" else t for t in task_set],
                    name=task_set.name)
    rules = RULES.model_copy(update={"budgets": {"cpu": [32]}})
    rf = _generate(engine, tasks, rules, seed=PAD_SEED)
    ids = rf.rows[2].completion_ids
    assert (rf.rows[2].problem_id, rf.rows[2].task_reward) == ("arith-1-s3", 1.0)
    tok = checkpoint.tokenizer
    assert extract_answer(tok.decode(ids, skip_special_tokens=True)) == "18"
    assert extract_answer(tok.decode(ids, skip_special_tokens=False)) == "8"
    v = _verdict(rf, tasks, checkpoint, rules)
    assert v.accepted, v.detail


def _upside_down(ambiguous_llr: float | None = None) -> EvidenceRules:
    """Evidence rules whose cheat shape sits on the exact bin (made up: every honest token is evidence against the
    worker), with a second compute class `cpu-bf16` that weighs the same bins differently."""
    n = len(MARGIN_EDGES)
    rules = EvidenceRules(components=(
        Component(name="replay_margin", edges=MARGIN_EDGES, weight=0.5, alternative=(1.0,) + (0.0,) * (n - 1),
                  honest={"cpu-fp32": (0.01,) + (0.99 / (n - 1),) * (n - 1),
                          "cpu-bf16": (0.5,) + (0.5 / (n - 1),) * (n - 1)}),
    ), default_class="cpu-fp32")
    return rules if ambiguous_llr is None else rules.model_copy(update={"ambiguous_llr": ambiguous_llr})


def test_ambiguous_at_exactly_the_ambiguous_llr_and_its_detail(honest: RolloutFile, task_set: Any,
                                                                checkpoint: Checkpoint) -> None:
    """LLR ≥ ambiguous_llr is ambiguous, the bound itself included; the detail names both numbers and the class
    judged; the verdict keeps the stats of the checks that passed."""
    ok = _verdict(honest, task_set, checkpoint)
    first = _verdict(honest, task_set, checkpoint, evidence=_upside_down())
    llr = first.llr
    assert llr is not None and llr > 0
    at = _verdict(honest, task_set, checkpoint, evidence=_upside_down(ambiguous_llr=llr))
    assert (at.outcome, at.reason, at.llr) == ("ambiguous", EVIDENCE_HIGH, llr)
    assert at.detail == (f"every bound passed, but the submission's evidence LLR {llr:.2f} ≥ {llr:.2f} "
                         "(class cpu-fp32): ambiguous, held")
    above = _verdict(honest, task_set, checkpoint, evidence=_upside_down(ambiguous_llr=math.nextafter(llr, math.inf)))
    assert above.outcome == "accept" and above.accepted and above.llr == llr
    assert at.stats == ok.stats and at.observations == above.observations and at.observations is not None


def test_the_llr_is_the_declared_compute_classes(honest: RolloutFile, task_set: Any,
                                                 checkpoint: Checkpoint) -> None:
    """`compute_class` picks the honest distribution the LLR is computed against (and the class the detail names);
    an unknown class is judged as the default one."""
    ev = _upside_down(ambiguous_llr=1e-9)
    data, claim = honest.to_bytes(), _claim(honest)
    default = check_submission(data, claim, task_set, RULES, lambda step: checkpoint, evidence=ev)
    bf16 = check_submission(data, claim, task_set, RULES, lambda step: checkpoint, evidence=ev,
                            compute_class="cpu-bf16")
    unknown = check_submission(data, claim, task_set, RULES, lambda step: checkpoint, evidence=ev,
                               compute_class="tpu")
    assert default.llr is not None and bf16.llr is not None and bf16.llr < default.llr
    assert unknown.llr == default.llr
    assert "(class cpu-bf16)" in bf16.detail and "(class cpu-fp32)" in unknown.detail


def test_a_bad_file_is_rejected_with_the_parsers_error_naming_the_rollouts_cid(honest: RolloutFile, task_set: Any,
                                                                               checkpoint: Checkpoint) -> None:
    v = check_submission(b"not a rollout file", _claim(honest), task_set, RULES, lambda step: checkpoint)
    assert (v.outcome, v.reason, v.stats) == ("reject", "bad_file", {})
    assert v.detail == ("rollout file bafk-rollouts: header of 8030516687083433838 bytes, over the cap of 262144 "
                        "(not a rollout file?)")


def test_prompts_are_tokenised_without_special_tokens(honest: RolloutFile, task_set: Any,
                                                      checkpoint: Checkpoint) -> None:
    """A checkpoint whose tokenizer adds a BOS token by default: the prompt ids are the text's own tokens (as the
    worker's engine wrote them), no BOS, so the honest file is accepted."""
    bos = AutoTokenizer.from_pretrained(str(tiny_model_dir()), add_bos_token=True)
    text = prompt_text(task_set[honest.rows[0].problem_id], 6)
    assert bos(text)["input_ids"][0] == bos.bos_token_id != bos(text, add_special_tokens=False)["input_ids"][0]
    v = _verdict(honest, task_set, Checkpoint(checkpoint.model, bos, CID))
    assert v.accepted, v.detail
