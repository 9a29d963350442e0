"""The demo and the experiments: product code uses none of this.

- `python -m intellect.agents.demo` (`make demo`, `swarm.py`): a whole local training swarm in one command
  (anvil, the contracts, trainer, relay, honest and cheating workers, validators, the dashboard), its
  final table and `summary.py` (`runs/<id>/summary.json`);
- `report.py`: `runs/<id>/report.html` and its plots from a summary (`python -m intellect.agents.demo.report`);
- `learn.py`: the single-process asynchronous GRPO experiment that shows the policy learns
  (`python -m intellect.agents.demo.learn`).
"""
