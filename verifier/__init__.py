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
- `intellect.verifier.models`: `smollm2_path()` (the offline SmolLM2-135M checkpoint, cached)
"""
