"""The four roles of a pool and their runtime: what `intellect-agent` runs.

- `trainer.py`: owns the pool's policy, trains GRPO steps on attested rollouts, publishes checkpoints;
- `worker.py`: claims tasks, generates rollouts with TOPLOC proofs, submits them;
- `validator.py`: checks the submissions it holds a slot of and those it must vote on (`validator.check`) with
  `intellect.verifier.submission.check_submission`, attests or challenges, votes and resolves;
- `relay.py`: relays checkpoints (Shardcast) and serves IPFS blocks;
- `_runtime.py` (the `Agent` base: chain, IPFS, the node directory, the loop), `_server.py` (the HTTP face:
  `/status`, `/metrics`), `_state.py` (the crash-safe SQLite store), `pool_rules.py` (the pool's on-chain rules).

A role never imports another role, the demo or the attack kit: what honest nodes must agree on lives in
`intellect.verifier.submission`; what they share to do their work lives in `intellect.agents` (engines,
GRPO, the rollout builder, tasks, models).
"""
