"""intellect.verifier: TOPLOC proofs, reward verifiers and seeded task sampling.

Submodules (import them directly; this package import stays light and never loads torch):
- `intellect.verifier.toploc`: `build_proofs`, `verify_proofs`, `proofs_hash`, `Thresholds`
- `intellect.verifier.prefill`: `prefill_hidden_states`, `verify_samples` (one batched prefill)
- `intellect.verifier.capture`: hidden-state capture during transformers generation
- `intellect.verifier.replay`: the replayable (seeded Gumbel-max) sampler: `sample_seed`,
  `gumbel_noise`, `gumbel_sample`, `replay_margins`
- `intellect.verifier.rewards`: `task_reward`, `length_penalty`, `thinking_budget_suffix`, `reward`
- `intellect.verifier.sandbox`: `run_python` (code against tests under OS limits)
- `intellect.verifier.tasks`: the task-set schema and `sample_problems`
- `intellect.verifier.tasksets`: task sets from public datasets (GSM8K, MATH, NuminaMath, MBPP, HumanEval,
  reasoning-gym): `convert`, `split`, `merge`, `stats`; `tasksets_cli`: the `intellect taskset` commands
- `intellect.verifier.rollouts`: the rollout file (`RolloutFile`, schema `intellect.rollouts/v2`; old Parquet
  `v1` files are read in a child process: `intellect.verifier.isolation`)
- `intellect.verifier.submission`: what a valid submission is: prompt format, thinking budgets, group
  scoring and advantages, the staleness rule, `check_submission` (the validator's acceptance rule)
- `intellect.verifier.completion`: `check_completion_end` (a completion ends where the sampler ended)
- `intellect.verifier.assignment`: `assigned_validators` (the stake-weighted slots the chain assigns a claim,
  whose attestations alone count), `trainable` (when the trainer may train on it), `effective_quorum`
- `intellect.verifier.models`: `smollm2_path()` (the offline SmolLM2-135M checkpoint, cached)
"""
