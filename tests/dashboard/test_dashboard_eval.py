"""The trainer's held-out evaluation reaches the dashboard's checkpoint rows and reward curve (issue 17)."""

from __future__ import annotations

from intellect.sdk.dashboard import CheckpointView, reward_curve


def test_eval_numbers_from_trainer_status_fill_checkpoint_rows() -> None:
    cps = [CheckpointView(pool_id=1, step=s, manifest_cid=f"cid{s}", block=s, time=s, tx="0x") for s in (0, 1, 2)]
    steps = {0: {"step": 0, "eval_pass_at_1": 0.25, "eval_mean_reward": 0.2},
             1: {"step": 1, "mean_reward": 0.5, "rollouts": 8},
             2: {"step": 2, "mean_reward": 0.6, "rollouts": 8, "eval_pass_at_1": 0.5, "eval_mean_reward": 0.45}}
    curve = reward_curve(steps, [], cps)
    assert [c.eval_pass_at_1 for c in cps] == [0.25, None, 0.5]
    assert [c.eval_mean_reward for c in cps] == [0.2, None, 0.45]
    assert [p.eval_pass_at_1 for p in curve] == [0.25, None, 0.5]
