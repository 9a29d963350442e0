"""Scripted mutation testing of the protocol's core rules (issue 39).

Each mutant is one exact text replacement in one file (it must occur exactly once), and the named test files run
(`pytest -x -q`). A Python file is mutated in a private copy of verifier/ and agents/ put first on PYTHONPATH (the
working tree is never touched, so other runs can go on beside it); a contract is rewritten in place and restored,
whatever happens.
A mutant is *killed* when the tests fail, *survived* when they pass. Equivalent mutants (no test can
tell them apart from today's code) are listed with the reason and not run. Solidity mutants are
recompiled by brownie when its test session loads the project (the build cache is keyed by source).

Usage:
    python tools/mutate.py                       # every mutant, a markdown table on stdout
    python tools/mutate.py --only prefill-tie-margin toploc-agg-default
    python tools/mutate.py --module verifier/toploc.py --timeout 600
    python tools/mutate.py --list                # the mutants, without running anything
    python tools/mutate.py --changed main        # only mutants of files changed since `main`
    python tools/mutate.py --changed HEAD~1 --timeout 300 --budget 600   # .ci/run: the last commit's rule files

Exit status 1 when a non-equivalent mutant survived (or could not be applied).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

V = "tests/verifier"
C = "tests/contracts"
S = "tests/security/test_security_contracts.py"
SP = f"{V}/test_verifier_sandbox_pins.py::"


@dataclass(frozen=True)
class Mutant:
    id: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]
    equivalent: str | None = None
    """why no test can distinguish it from today's code (then it is listed, not run)"""


MUTANTS: list[Mutant] = [
    # -- verifier/prefill.py: the sampler replay --------------------------------------------------------
    Mutant("prefill-tie-margin", "verifier/prefill.py",
           "differing=int((margins > thresholds.replay_tie_margin).sum())",
           "differing=int((margins > thresholds.max_replay_margin).sum())",
           (f"{V}/test_verifier_rule_limits.py",)),
    Mutant("prefill-per-token-le", "verifier/prefill.py",
           "if not stats.max_margin <= thresholds.max_replay_margin:",
           "if not stats.max_margin < thresholds.max_replay_margin:",
           (f"{V}/test_verifier_rule_limits.py",)),
    Mutant("prefill-logprob-floor", "verifier/prefill.py",
           "if float(lp[worst]) < min_token_logprob:", "if float(lp[worst]) <= min_token_logprob:",
           (f"{V}/test_verifier_rule_limits.py",)),
    Mutant("prefill-seeded-skips-replay", "verifier/prefill.py",
           "if seed is not None and thresholds.max_replay_margin is not None:",
           "if False:",
           (f"{V}/test_verifier_rule_limits.py", f"{V}/test_verifier_prefill.py")),
    Mutant("prefill-empty-completion", "verifier/prefill.py",
           'if len(completion) == 0:\n        raise PrefillError("empty completion")',
           "if False:\n        pass",
           (f"{V}/test_verifier_prefill.py",)),
    # -- verifier/toploc.py: per chunk, per submission -------------------------------------------------
    Mutant("toploc-exp-mismatch", "verifier/toploc.py",
           "if s.exp_mismatches > thresholds.max_exp_mismatches:",
           "if s.exp_mismatches > thresholds.max_exp_mismatches + 1:",
           (f"{V}/test_verifier_rule_limits.py",)),
    Mutant("toploc-skip-mean", "verifier/toploc.py",
           "elif s.mant_err_mean > thresholds.max_mant_err_mean:",
           "elif False:",
           (f"{V}/test_verifier_rule_limits.py", f"{V}/test_verifier_toploc.py")),
    Mutant("toploc-median-ge", "verifier/toploc.py",
           "elif s.mant_err_median > thresholds.max_mant_err_median:",
           "elif s.mant_err_median >= thresholds.max_mant_err_median:",
           (f"{V}/test_verifier_rule_limits.py",)),
    Mutant("toploc-agg-default", "verifier/toploc.py",
           "DEFAULT_MAX_AGG_MANT_ERR_MEAN: float | None = 2.5", "DEFAULT_MAX_AGG_MANT_ERR_MEAN: float | None = 25",
           (f"{V}/test_verifier_rule_limits.py", f"{V}/test_verifier_toploc.py")),
    Mutant("toploc-agg-ge", "verifier/toploc.py", "    if mean > bound:", "    if mean >= bound:",
           (f"{V}/test_verifier_rule_limits.py",)),
    Mutant("toploc-agg-min-chunks", "verifier/toploc.py",
           "len(means) < thresholds.min_agg_chunks:", "len(means) <= thresholds.min_agg_chunks:",
           (f"{V}/test_verifier_rule_limits.py",)),
    Mutant("toploc-budget-ge", "verifier/toploc.py", "    if differing > allowed:", "    if differing >= allowed:",
           (f"{V}/test_verifier_rule_limits.py",)),
    Mutant("toploc-budget-rate", "verifier/toploc.py",
           "return thresholds.max_replay_differing + int(thresholds.max_replay_differing_rate * tokens)",
           "return thresholds.max_replay_differing + int(thresholds.max_replay_differing_rate * tokens) + 1",
           (f"{V}/test_verifier_rule_limits.py",)),
    Mutant("toploc-default-tie", "verifier/toploc.py",
           "DEFAULT_REPLAY_TIE_MARGIN = 0.25", "DEFAULT_REPLAY_TIE_MARGIN = 1.0",
           (f"{V}/test_verifier_rule_limits.py",)),
    Mutant("toploc-upper-median", "verifier/toploc.py",
           "np.minimum(n_match // 2, idx.shape[1] - 1)", "np.minimum(n_match // 2 - 1, idx.shape[1] - 1)",
           (f"{V}/test_verifier_toploc.py", f"{V}/test_verifier_rule_limits.py")),
    # -- verifier/replay.py: top-p --------------------------------------------------------------------
    Mutant("replay-top-p-tie", "verifier/replay.py",
           "drop_sorted = (probs.cumsum(dim=-1) - probs) >= top_p",
           "drop_sorted = (probs.cumsum(dim=-1) - probs) > top_p",
           (f"{V}/test_verifier_rule_limits.py",)),
    # -- verifier/submission.py: rewards, assignment, staleness ---------------------------------------
    Mutant("submission-reward-tol", "verifier/submission.py", "REWARD_TOL = 1e-4", "REWARD_TOL = 1e-1",
           (f"{V}/test_verifier_submission.py",)),
    Mutant("submission-reward-tol-ge", "verifier/submission.py",
           "bad = {k: v for k, v in diffs.items() if v > REWARD_TOL}",
           "bad = {k: v for k, v in diffs.items() if v > REWARD_TOL and k != 'length_penalty'}",
           (f"{V}/test_verifier_submission.py",)),
    Mutant("submission-row-target", "verifier/submission.py",
           "if r.target_length != a.target_len:", "if i == 0 and r.target_length != a.target_len:",
           (f"{V}/test_verifier_submission.py",)),
    Mutant("submission-stale", "verifier/submission.py",
           "return train_step - policy_step > async_level", "return train_step - policy_step >= async_level",
           (f"{V}/test_verifier_submission.py",)),
    Mutant("submission-fresh-future", "verifier/submission.py",
           "return policy_step <= train_step and not too_stale", "return not too_stale",
           (f"{V}/test_verifier_submission.py",)),
    # -- agents/grpo.py: the loss and the trainer's trust in rewards -------------------------------------
    Mutant("grpo-epsilon", "agents/grpo.py", "    epsilon: float = 0.2,", "    epsilon: float = 0.3,",
           ("tests/agents/test_agents_grpo.py",)),
    Mutant("grpo-delta", "agents/grpo.py", "    delta: float = 4.0,", "    delta: float = 5.0,",
           ("tests/agents/test_agents_grpo.py",)),
    Mutant("grpo-two-sided", "agents/grpo.py",
           "token_loss = torch.where(advantages < 0, torch.minimum(pg_max, pg3), pg_max)",
           "token_loss = pg_max",
           ("tests/agents/test_agents_grpo.py",)),
    Mutant("grpo-pessimistic", "agents/grpo.py", "pg_max = torch.maximum(pg1, pg2)", "pg_max = torch.minimum(pg1, pg2)",
           ("tests/agents/test_agents_grpo.py",)),
    Mutant("grpo-reward-range", "agents/grpo.py", "if not math.isfinite(v) or not lo <= v <= hi:",
           "if not math.isfinite(v):", ("tests/agents/test_agents_grpo.py", "tests/agents/test_grpo_untrusted.py")),
    Mutant("grpo-advantage-clamp", "agents/grpo.py", "return adv.clamp(-max_abs, max_abs).tolist()",
           "return adv.tolist()", ("tests/agents/test_agents_grpo.py", "tests/agents/test_grpo_untrusted.py")),
    Mutant("grpo-zero-filter", "agents/grpo.py", "return advantages.abs().amax(dim=1) > atol",
           "return advantages.abs().amax(dim=1) >= atol", ("tests/agents/test_agents_grpo.py",)),
    Mutant("grpo-stale-future", "agents/grpo.py", "        if policy_step > train_step:",
           "        if policy_step >= train_step:", ("tests/agents/test_agents_grpo.py",),
           equivalent="reached only when not is_fresh(t, s, a): s == t is always fresh (a >= 0; a < 0 raises first)"),
    # -- verifier/budget_class.py --------------------------------------------------------------------
    Mutant("class-threshold-ge", "verifier/budget_class.py", "if rate >= thresholds.get(c, float(\"inf\")):",
           "if rate > thresholds.get(c, float(\"inf\")):", (f"{V}/test_verifier_budget_class.py",)),
    Mutant("class-history", "verifier/budget_class.py", "    if len(last) < history:", "    if len(last) < history - 1:",
           (f"{V}/test_verifier_budget_class.py",)),
    # -- contracts: the rule functions ----------------------------------------------------------------
    Mutant("stake-withdraw-early", "contracts/StakeManager.sol",
           "if (block.timestamp < info.releaseAt)", "if (block.timestamp + 1 < info.releaseAt)",
           (f"{C}/test_contracts_rule_limits.py",)),
    Mutant("ledger-challenge-window", "contracts/TaskLedger.sol",
           "if (block.timestamp >= windowEnd) revert TaskLedgerWindowClosed",
           "if (block.timestamp > windowEnd) revert TaskLedgerWindowClosed",
           (f"{S}::test_challenge_last_second_of_window_beats_claim", f"{S}::test_claim_first_second_after_window_ends_challenges")),
    Mutant("ledger-claim-window", "contracts/TaskLedger.sol",
           "if (block.timestamp < s.windowEnd) revert TaskLedgerWindowOpen",
           "if (block.timestamp + 1 < s.windowEnd) revert TaskLedgerWindowOpen",
           (f"{S}::test_challenge_last_second_of_window_beats_claim", f"{S}::test_claim_first_second_after_window_ends_challenges")),
    Mutant("ledger-vote-period", "contracts/TaskLedger.sol",
           "if (block.timestamp >= c.voteEnd) revert TaskLedgerVotePeriodOver",
           "if (block.timestamp > c.voteEnd) revert TaskLedgerVotePeriodOver",
           (f"{C}/test_contracts_rule_limits.py",)),
    Mutant("ledger-lease-expired", "contracts/TaskLedger.sol",
           "if (block.timestamp > t.leaseExpiry) revert TaskLedgerLeaseExpired",
           "if (block.timestamp >= t.leaseExpiry) revert TaskLedgerLeaseExpired",
           (f"{C}/test_contracts_rule_limits.py",)),
    Mutant("ledger-lease-not-expired", "contracts/TaskLedger.sol",
           "if (block.timestamp <= t.leaseExpiry) revert TaskLedgerLeaseNotExpired",
           "if (block.timestamp < t.leaseExpiry) revert TaskLedgerLeaseNotExpired",
           (f"{C}/test_contracts_rule_limits.py",)),
    Mutant("ledger-open-leases", "contracts/TaskLedger.sol",
           "if (book.openLeases >= hot.maxOpenLeases)", "if (book.openLeases > hot.maxOpenLeases)",
           (f"{S}::test_lease_hoarding_capped_and_expired_leases_count",)),
    Mutant("ledger-max-units", "contracts/TaskLedger.sol",
           "workUnits > hot.maxUnits)", "workUnits >= hot.maxUnits)",
           (f"{C}/test_contracts_rule_limits.py::test_submitWork_at_maxUnits_accepted",)),
    Mutant("ledger-budget", "contracts/TaskLedger.sol",
           "if (funds.budget < reward) revert", "if (funds.budget <= reward) revert",
           (f"{C}/test_contracts_rule_limits.py",)),
    Mutant("ledger-reservation-cap", "contracts/TaskLedger.sol",
           "if (reserved > cap) revert", "if (reserved >= cap) revert",
           (f"{C}/test_contracts_rule_limits.py",)),
    Mutant("ledger-stale-step", "contracts/TaskLedger.sol",
           "if (policyStep < minStep) revert", "if (policyStep <= minStep) revert",
           (f"{C}/test_contracts_ledger.py::test_submitWork_policy_step_window",)),
    Mutant("ledger-future-step", "contracts/TaskLedger.sol",
           "if (policyStep > latest) revert", "if (policyStep >= latest) revert",
           (f"{C}/test_contracts_ledger.py::test_submitWork_policy_step_window",)),
    Mutant("ledger-bond-floor", "contracts/libraries/PoolRules.sol", "if (params.challengeBond < minChallengeBond) {",
           "if (params.challengeBond <= minChallengeBond) {", (f"{C}/test_contracts_rule_limits.py",)),
    Mutant("ledger-quorum-floor", "contracts/libraries/PoolRules.sol", "if (params.quorum < minQuorum) revert",
           "if (params.quorum <= minQuorum) revert", (f"{C}/test_contracts_rule_limits.py",)),
    Mutant("ledger-slash-cap", "contracts/libraries/PoolRules.sol", "if (params.slashAmount > workerMinStake) revert",
           "if (params.slashAmount >= workerMinStake) revert",
           (f"{S}::test_honeypot_pool_slash_above_min_stake_refused",)),
    Mutant("ledger-min-window", "contracts/libraries/PoolRules.sol", "if (params.windowLength < minWindowLength) {",
           "if (params.windowLength <= minWindowLength) {", (f"{C}/test_contracts_rule_limits.py",)),
    Mutant("stake-share-cap", "contracts/StakeManager.sol", "if (bps > _BPS) revert StakeManagerInvalidShare(bps);",
           "if (bps >= _BPS) revert StakeManagerInvalidShare(bps);", (f"{C}/test_contracts_rule_limits.py",)),
    # -- contracts/AttesterBook.sol: votes on the winning side paid (issue 33) ------------------------------
    Mutant("book-voter-reward-below-bond", "contracts/AttesterBook.sol",
           "if (rewardPerChallenge >= p.params.challengeBond) {", "if (rewardPerChallenge > p.params.challengeBond) {",
           (f"{C}/test_contracts_attesters.py",)),
    Mutant("book-voter-share-by-stake", "contracts/AttesterBook.sol",
           "amount = reward * weight / (upheld ? c.weightFor : c.weightAgainst);",
           "amount = reward / (upheld ? c.votesFor : c.votesAgainst);", (f"{C}/test_contracts_attesters.py",)),
    Mutant("book-voter-once", "contracts/AttesterBook.sol",
           "        _voterSettled[challengeId][validator] = c.round;\n", "", (f"{C}/test_contracts_attesters.py",)),
    Mutant("book-voter-rejected-challenger", "contracts/AttesterBook.sol",
           "|| (upheld && validator == c.challenger)", "|| (validator == c.challenger)",
           (f"{C}/test_contracts_attesters.py",)),
    # -- verifier/isolation.py: the child's own code (another process: mutmut cannot follow it there) -------
    Mutant("iso-child-cpu-limit", "verifier/isolation.py",
           "    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))\n", "", (f"{V}/test_verifier_isolation.py", f"{V}/test_verifier_isolation_outcome.py")),
    Mutant("iso-child-fsize", "verifier/isolation.py",
           "    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))", "    pass", (f"{V}/test_verifier_isolation.py", f"{V}/test_verifier_isolation_outcome.py")),
    Mutant("iso-child-core", "verifier/isolation.py",
           "    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n", "", (f"{V}/test_verifier_isolation.py", f"{V}/test_verifier_isolation_outcome.py")),
    Mutant("iso-child-dumpable", "verifier/isolation.py",
           "ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)", "ctypes.CDLL(None, use_errno=True)", (f"{V}/test_verifier_isolation.py", f"{V}/test_verifier_isolation_outcome.py")),
    Mutant("iso-child-memory-exit", "verifier/isolation.py",
           "    except MemoryError:\n        return _EXIT_MEMORY", "    except MemoryError:\n        return 0", (f"{V}/test_verifier_isolation.py", f"{V}/test_verifier_isolation_outcome.py")),
    Mutant("iso-child-wrapped-memory", "verifier/isolation.py",
           "if isinstance(exc.__cause__, MemoryError):", "if False:", (f"{V}/test_verifier_isolation.py", f"{V}/test_verifier_isolation_outcome.py")),
    Mutant("iso-child-refused-frame", "verifier/isolation.py",
           "out.write(_REFUSED + str(exc)", "out.write(_OK + str(exc)", (f"{V}/test_verifier_isolation.py", f"{V}/test_verifier_isolation_outcome.py")),
    Mutant("iso-child-setup-status", "verifier/isolation.py", "        return _EXIT_SETUP", "        return 0", (f"{V}/test_verifier_isolation.py", f"{V}/test_verifier_isolation_outcome.py")),
    # -- verifier/sandbox.py: what runs in the forked child (preexec_fn), inside the sandbox (the runners' source)
    # or is a module constant / decorated function mutmut does not mutate; the rest is mutmut's. Run with
    # INTELLECT_SANDBOX_REQUIRED=own_fs (run_mutant sets it; they are not run where the sandbox has no tmpfs of its own):
    # without it, a mutant that breaks the sandbox only makes the other tests skip
    *(Mutant(f"sandbox-{mid}", "verifier/sandbox.py", old, new,
             (f"{SP}test_the_sandbox_is_here_where_it_must_be", *(t if "/" in t else SP + t for t in tests)))
      for mid, old, new, tests in (
        ("child-cpu-hard", "(limits.cpu_seconds, limits.cpu_seconds + 1))", "(limits.cpu_seconds, limits.cpu_seconds + 2))",
         ("test_the_child_sets_every_limit_and_joins_a_keyring_of_its_own",)),
        ("child-cpu", "        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 1))\n", "",
         ("test_inside_every_limit_is_the_one_asked_for", f"{V}/test_verifier_sandbox.py::test_run_python_infinite_loop_hits_cpu_limit")),
        ("child-memory", "        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))\n", "",
         (f"{V}/test_verifier_sandbox.py::test_run_python_memory_bomb_is_contained",)),
        ("child-fsize", "        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.max_output_bytes, limits.max_output_bytes))\n",
         "", (f"{V}/test_verifier_sandbox.py::test_run_python_output_flood_is_capped",)),
        ("child-core", "        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n", "",
         ("test_inside_every_limit_is_the_one_asked_for",)),
        ("child-msgqueue", "        resource.setrlimit(resource.RLIMIT_MSGQUEUE, (0, 0))", "        pass",
         ("test_inside_every_limit_is_the_one_asked_for",)),
        ("child-nofile", "        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))", "        pass",
         (f"{V}/test_verifier_sandbox_bounds.py::test_a_parent_holding_many_descriptors_still_starts_sandboxes",)),
        ("child-nofile-first", "        import resource\n\n        resource.setrlimit(resource.RLIMIT_CPU,",
         "        import resource\n\n        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))\n        resource.setrlimit(resource.RLIMIT_CPU,",
         (f"{V}/test_verifier_sandbox_bounds.py::test_a_parent_holding_many_descriptors_still_starts_sandboxes",)),
        ("child-drop-root", "        if uid is not None:  # root: start bwrap without any of root's privileges", "        if False:",
         ("test_a_sandbox_process_starts_alone_in_its_session_with_an_empty_environment_and_a_0600_output",
          f"{V}/test_verifier_sandbox.py::test_run_python_fork_bomb_is_contained")),
        ("child-keyring", "if join_keyring is not None and join_keyring() < 0:", "if False:",
         ("test_the_child_sets_every_limit_and_joins_a_keyring_of_its_own",)),
        ("child-private-fs", "        if fs_dir is not None:\n            _enter_private_fs(fs_dir, limits)", "        pass",
         ("test_inside_every_limit_is_the_one_asked_for",
          f"{V}/test_verifier_sandbox_bounds.py::test_many_small_files_stop_at_the_inode_bound")),
        ("fs-size", "size={limits.tmp_bytes},", "size={limits.tmp_bytes * 2},",
         (f"{V}/test_verifier_sandbox_bounds.py::test_one_big_file_stops_at_the_size_bound",)),
        ("fs-inodes", ",nr_inodes={limits.tmp_inodes}", "",
         (f"{V}/test_verifier_sandbox_bounds.py::test_many_small_files_stop_at_the_inode_bound",)),
        ("fs-nosuid", "b\"tmpfs\", _MS_NOSUID | _MS_NODEV, opts)", "b\"tmpfs\", 0, opts)",
         ("test_as_root_the_child_drops_to_the_throw_away_uid_and_mounts_the_bounded_tmpfs",)),
        ("fs-shm", '("kernel/shmmni", "0")', '("kernel/shmmni", "4096")',  # shmmax 0 already refuses every shmget:
         ("test_inside_every_limit_is_the_one_asked_for",  # the value, read from inside, tells them apart
          f"{V}/test_verifier_sandbox_bounds.py::test_no_user_namespace_sysv_ipc_memfd_socket_buffer_or_dev_file")),
        ("fs-msg", '("kernel/msgmni", "0")', '("kernel/msgmni", "32000")',
         (f"{V}/test_verifier_sandbox_bounds.py::test_no_user_namespace_sysv_ipc_memfd_socket_buffer_or_dev_file",)),
        ("fs-sem", '("kernel/sem", "0 0 0 0")', '("kernel/sem", "32000 1024000000 500 32000")',
         (f"{V}/test_verifier_sandbox_bounds.py::test_no_user_namespace_sysv_ipc_memfd_socket_buffer_or_dev_file",)),
        ("fs-userns", '("user/max_user_namespaces", "2")', '("user/max_user_namespaces", "3")',
         (f"{V}/test_verifier_sandbox_bounds.py::test_no_user_namespace_sysv_ipc_memfd_socket_buffer_or_dev_file",)),
        ("fs-ipc-ns", "libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWIPC)", "libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNS)",
         ("test_inside_every_limit_is_the_one_asked_for",)),
        ("bwrap-net", '"--unshare-net", ', "", ("test_inside_it_is_nobody_alone_with_no_capability_network_or_environment",)),
        ("bwrap-pid", '"--unshare-pid", ', "", ("test_inside_it_is_nobody_alone_with_no_capability_network_or_environment",)),
        ("bwrap-cgroup", '"--unshare-cgroup-try",', "",
         ("test_inside_it_is_nobody_alone_with_no_capability_network_or_environment",)),
        ("bwrap-die-with-parent", '"--die-with-parent", ', "",
         ("test_inside_it_is_nobody_alone_with_no_capability_network_or_environment",)),
        ("bwrap-new-session", '"--new-session", ', "",
         ("test_inside_it_is_nobody_alone_with_no_capability_network_or_environment",)),
        ("bwrap-cap-drop", '"--cap-drop", "ALL", ', "",
         ("test_inside_it_is_nobody_alone_with_no_capability_network_or_environment",)),
        ("bwrap-ro-usr", '"--ro-bind", "/usr", "/usr"]', '"--bind", "/usr", "/usr"]',
         ("test_inside_it_is_nobody_alone_with_no_capability_network_or_environment",)),
        ("bwrap-ro-dev", '    argv += ["--remount-ro", "/dev",', "    argv += [",
         ("test_inside_it_is_nobody_alone_with_no_capability_network_or_environment",)),
        ("bwrap-nobody", '"--uid", str(NOBODY), "--gid", str(NOBODY),', '"--uid", "0", "--gid", "0",',
         ("test_inside_it_is_nobody_alone_with_no_capability_network_or_environment",)),
        ("bwrap-clearenv", '"--hostname", "sandbox", "--clearenv",', '"--hostname", "sandbox",',  # _Proc starts bwrap
         ("test_bwrap_argv_own_fs_binds_our_tmpfs_and_the_prefix_outside_usr",  # with env={"PATH": ..} too: the
          "test_bwrap_argv_without_own_fs_has_bwraps_ipc_namespace_and_sized_tmpfs",  # argv tells them apart
          "test_inside_it_is_nobody_alone_with_no_capability_network_or_environment")),
        ("bwrap-isolated", '"-I", "-S", "-B", "-c"]', '"-S", "-B", "-c"]',
         ("test_inside_it_is_nobody_alone_with_no_capability_network_or_environment",)),
        ("bwrap-seccomp", '        argv += ["--seccomp", str(seccomp_fd)]', "        pass",
         ("test_inside_it_is_nobody_alone_with_no_capability_network_or_environment",)),
        ("seccomp-memfd", "(jeq, 8, 0, memfd),", "(jeq, 9, 0, memfd),",
         ("test_inside_it_is_nobody_alone_with_no_capability_network_or_environment",)),
        ("seccomp-sndbuf", "_SO_BUFFER_OPTS = 1, (7, 8, 32, 33)", "_SO_BUFFER_OPTS = 1, (6, 8, 32, 33)",
         (f"{V}/test_verifier_sandbox_bounds.py::test_no_user_namespace_sysv_ipc_memfd_socket_buffer_or_dev_file",)),
        ("seccomp-other-abi", "(ld, 0, 0, 4), (jeq, 1, 0, arch), (ret, 0, 0, kill),", "(ld, 0, 0, 4), (jeq, 1, 1, arch), (ret, 0, 0, kill),",
         ("test_the_seccomp_program_refuses_memfd_and_socket_buffer_growth_and_other_abis",)),
        ("keyctl-join", "_KEYCTL_JOIN_SESSION_KEYRING = 1", "_KEYCTL_JOIN_SESSION_KEYRING = 0",
         ("test_the_seccomp_pipe_holds_the_program_and_keyctl_joins_a_session_keyring",
          "test_the_child_sets_every_limit_and_joins_a_keyring_of_its_own")),
        ("runner-nproc", 'resource.setrlimit(resource.RLIMIT_NPROC, (_orders["nproc"], _orders["nproc"]))', "pass",
         ("test_inside_every_limit_is_the_one_asked_for", f"{V}/test_verifier_sandbox.py::test_run_python_fork_bomb_is_contained")),
        ("runner-stdin", "os.dup2(_null, 0)\n", "",
         ("test_the_completion_reads_nothing_on_its_stdin_and_prints_only_to_its_output",)),
        ("runner-stdout", "os.dup2(2, 1)\n", "",
         ("test_the_completion_reads_nothing_on_its_stdin_and_prints_only_to_its_output",)),
        ("candidate-syntax", '_send({"load": "syntax_error", "detail": _describe(e)})', '_send({"load": "failed", "detail": _describe(e)})',
         ("test_each_way_a_run_ends_has_its_verdict",)),
        ("candidate-memory", '_send({"load": "memory_limit", "detail": "MemoryError"})', '_send({"load": "failed", "detail": "MemoryError"})',
         ("test_each_way_a_run_ends_has_its_verdict",)),
        ("tester-assertion", "if exc is None or exc is AssertionError:", "if exc is None:",
         ("test_an_assertion_error_of_the_completion_cannot_be_caught_as_the_tests_own",)),
        ("tester-builtins", 'if name.startswith("__") or hasattr(builtins, name):', 'if name.startswith("__"):',
         ("test_builtins_the_tests_use_are_their_own_not_calls_into_the_completion",)),
        ("tester-refused", 'raise _Refused("the test passes %s to %s()" % (e, name))', 'raise TypeError("the test passes %s to %s()" % (e, name))',
         ("test_each_way_a_run_ends_has_its_verdict",)),
        ("tester-prelude", '        if _orders["prelude"]:', "        if False:",
         ("test_the_prelude_runs_on_the_tests_side_and_the_completion_cannot_replace_it",)),
        ("verdict-no-calls", "reason = SandboxReason.PASSED if calls else SandboxReason.NO_CALLS", "reason = SandboxReason.PASSED",
         ("test_builtins_the_tests_use_are_their_own_not_calls_into_the_completion",)),
        ("verdict-forged-load", 'loaded["load"] in _LOAD_FAILURES:', 'loaded["load"] in {r.value for r in SandboxReason}:',
         ("test_a_load_verdict_forged_by_the_completion_is_never_a_pass",)),
        ("message-cap", "MAX_MESSAGE_BYTES = 16 * 2**20", "MAX_MESSAGE_BYTES = 17 * 2**20",
         ("test_recv_refuses_garbage_deep_nesting_and_a_message_over_16_mib",)),
        ("default-cpu", "cpu_seconds: int = Field(default=5, ge=1)", "cpu_seconds: int = Field(default=6, ge=1)",
         ("test_inside_the_defaults_hold_when_no_limits_are_given",)),
        ("default-wall", "wall_seconds: float = Field(default=10.0, gt=0)", "wall_seconds: float = Field(default=100.0, gt=0)",
         ("test_the_limits_defaults_and_bounds",)),
        ("default-memory", "memory_bytes: int = Field(default=512 * 2**20, ge=64 * 2**20)",
         "memory_bytes: int = Field(default=1024 * 2**20, ge=64 * 2**20)", ("test_inside_the_defaults_hold_when_no_limits_are_given",)),
        ("default-nproc", "max_processes: int = Field(default=16, ge=1)", "max_processes: int = Field(default=17, ge=1)",
         ("test_inside_the_defaults_hold_when_no_limits_are_given",)),
        ("default-output", "max_output_bytes: int = Field(default=1 * 2**20, ge=1024)",
         "max_output_bytes: int = Field(default=2 * 2**20, ge=1024)", ("test_inside_the_defaults_hold_when_no_limits_are_given",)),
        ("bound-output", "max_output_bytes: int = Field(default=1 * 2**20, ge=1024)",
         "max_output_bytes: int = Field(default=1 * 2**20, ge=1)", ("test_the_limits_defaults_and_bounds",)),
        ("default-inodes", "tmp_inodes: int = Field(default=4096, ge=64, le=2**20)", "tmp_inodes: int = Field(default=40960, ge=64, le=2**20)",
         ("test_inside_the_defaults_hold_when_no_limits_are_given",)),
    )),
    Mutant("sandbox-candidate-errno", "verifier/sandbox.py", '{27: "output_limit", 28: "tmp_limit"}', '{28: "tmp_limit"}',
           (f"{SP}test_each_way_a_run_ends_has_its_verdict",),
           equivalent="run_python maps a FAILED load whose detail says 'File too large' to output_limit (the fallback a "
                      "call's EFBIG takes), so errno 27 at load reaches output_limit either way"),
    # -- contracts/AttesterBook.sol: attestation roots (issue 38) -----------------------------------------
    Mutant("root-recorded-in-window", "contracts/AttesterBook.sol",
           "rr.recordedAt >= t.windowEnd) return false;", "rr.recordedAt > t.windowEnd) return false;", (f"{C}/test_contracts_attester_roots.py",)),
    Mutant("root-pool", "contracts/AttesterBook.sol",
           "if (!attester || t.poolId != rr.poolId ||", "if (!attester ||", (f"{C}/test_contracts_attester_roots.py",)),
    Mutant("root-workers-owner", "contracts/AttesterBook.sol",
           "return owner != _registry.ownerOf(t.node);", "return true;", (f"{C}/test_contracts_attester_roots.py",)),
    Mutant("root-payable", "contracts/AttesterBook.sol",
           "if (t.status != ITaskLedger.TaskStatus.Paid && _ledger.claimable(leaf.submissionId) == 0) {",
           "if (t.status == ITaskLedger.TaskStatus.Upheld) {", (f"{C}/test_contracts_attester_roots.py",)),
    Mutant("root-spend-bound", "contracts/AttesterBook.sol",
           "if (rr.remaining < amount) revert", "if (rr.remaining < amount && false) revert", (f"{C}/test_contracts_attester_roots.py",)),
    Mutant("root-leaf-count", "contracts/AttesterBook.sol",
           "if (index >= leafCount) revert", "if (index > leafCount) revert", (f"{C}/test_contracts_attester_roots.py",)),
    Mutant("root-settled-once", "contracts/AttesterBook.sol",
           "if (bits & bit != 0) revert AttesterBookLeafSettled(root, index);", "", (f"{C}/test_contracts_attester_roots.py",)),
    Mutant("root-budget", "contracts/AttesterBook.sol",
           "if (budget < total) revert AttesterBookInsufficientBudget(poolId, budget, total);", "", (f"{C}/test_contracts_attester_roots.py",)),
    Mutant("root-release-rule", "contracts/AttesterBook.sol",
           "_leafValid(rr, t, attester, owner) && t.status != ITaskLedger.TaskStatus.Upheld",
           "t.status != ITaskLedger.TaskStatus.Upheld", (f"{C}/test_contracts_attester_roots.py",)),
    # -- verifier/_rollouts_v1.py and the math judge, in their real child processes (end to end; the functions
    # themselves are pinned in process by test_verifier_rollouts_v1_pins.py / test_verifier_rewards_whole.py)
    Mutant("v1-child-limits", "verifier/_rollouts_v1.py",
           'limits = RolloutLimits(**args.get("limits", {}))', "limits = RolloutLimits()",
           (f"{V}/test_verifier_rollouts_fuzz.py::test_rollout_file_each_cap_refuses",)),
    Mutant("v1-child-name", "verifier/_rollouts_v1.py",
           'str(args.get("name", "rollouts"))', '"rollouts"',
           (f"{V}/test_verifier_rollouts_fuzz.py::test_rollout_file_non_utf8_column_name_refused_in_from_bytes",)),
    Mutant("judge-child-fuel", "verifier/rewards.py",
           'if state["calls"] > fuel:', "if False:",
           (f"{V}/test_verifier_rewards.py::test_judge_over_budget_scores_zero_and_the_polynomial_is_over_budget_everywhere",)),
    Mutant("judge-warm-up", "verifier/rewards.py",  # the four warm-up comparisons of _judge_main, all gone
           "".join(line + "\n" for line in (r'    _judge_compare("\\frac{x^2+2x+1}{x+1}", "x+1")', r'    _judge_compare("\\{1,2\\}", "\\{2,1\\}")',
                                               r'    _judge_compare("[1,2)", "(1,2]")', r'    _judge_compare("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}")')), "",
           (f"{V}/test_verifier_rewards_pins.py::test_a_fresh_judge_process_pays_no_lazy_import_in_a_comparison",)),
    Mutant("judge-child-hash-seed", "verifier/rewards.py",
           'conn.send("ready" if os.environ.get("PYTHONHASHSEED") == "0" else "hash seed not fixed")',
           'conn.send("hash seed not fixed")',
           (f"{V}/test_verifier_rewards.py::test_answers_equal_uses_math_verify_for_latex",)),
]


def _changed(base: str) -> set[str]:
    out = subprocess.run(["git", "diff", "--name-only", base, "--"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    return set(out.split())


SANDBOX = "verifier/sandbox.py"
COPIED = ("verifier", "agents")
"""Python packages a mutant of theirs is applied to in a private copy (see `_python_copy`)."""


def _python_copy(m: Mutant) -> tuple[Path, dict[str, str]] | None:
    """A mutant of verifier/ or agents/ is applied to a private copy, never to the working tree: a staging folder
    build/mutate/<pid>/src/intellect/{verifier,agents} (copies) put first on PYTHONPATH, so `import
    intellect.verifier...` loads the copy in the tests and in every child they start (`intellect` is a namespace
    package; intellect.sdk still comes from the editable install). Other runs in the same checkout (mutmut, tests,
    a second mutate.py) go on seeing today's code. None for other files (contracts: rewritten in place)."""
    folder = m.file.partition("/")[0]
    if folder not in COPIED:
        return None
    stage = ROOT / "build" / "mutate" / str(os.getpid())
    shutil.rmtree(stage, ignore_errors=True)
    for name in COPIED:
        shutil.copytree(ROOT / name, stage / "src" / "intellect" / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    path = os.pathsep.join(p for p in (str(stage / "src"), os.environ.get("PYTHONPATH", "")) if p)
    return stage, {"PYTHONPATH": path, "PYTHONDONTWRITEBYTECODE": "1"}


def _sandbox_own_fs() -> tuple[bool, str]:
    """Whether sandboxes start here with their own tmpfs and namespaces (`_enter_private_fs`): only there can a
    mutant of verifier/sandbox.py be told apart (elsewhere a mutant that breaks the sandbox makes its tests skip)."""
    proc = subprocess.run(
        [sys.executable, "-c", "from intellect.verifier.sandbox import _probe\nrt, why = _probe()\n"
         "print('own_fs' if rt is not None and rt.own_fs else (why or 'bwrap --size only (no user namespace of ours)'))"],
        cwd=ROOT, capture_output=True, text=True)
    said = (proc.stdout.strip().splitlines() or [proc.stderr.strip()[-200:] or "the probe printed nothing"])[-1]
    return said == "own_fs", said


def run_mutant(m: Mutant, timeout: int) -> tuple[str, float]:
    """'killed', 'survived', 'timeout' or 'not-applied: ...', and the seconds the tests took."""
    original = (ROOT / m.file).read_text()
    if original.count(m.old) != 1:
        return f"not-applied: {original.count(m.old)} matches", 0.0
    t0 = time.monotonic()
    copy = _python_copy(m)
    path = ROOT / m.file if copy is None else copy[0] / "src" / "intellect" / m.file
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **(copy[1] if copy else {})}
    if m.file == SANDBOX:  # test_the_sandbox_is_here_where_it_must_be fails where a mutant broke the sandbox
        env["INTELLECT_SANDBOX_REQUIRED"] = "own_fs"
    try:
        path.write_text(original.replace(m.old, m.new))
        proc = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *m.tests],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
        verdict = "survived" if proc.returncode == 0 else "killed"
        if proc.returncode not in (0, 1):  # collection or compile error: still a failing run, say so
            verdict = f"killed (pytest exit {proc.returncode})"
    except subprocess.TimeoutExpired:
        verdict = "timeout"
    finally:
        if copy is None:
            path.write_text(original)
        else:
            shutil.rmtree(copy[0], ignore_errors=True)
    return verdict, time.monotonic() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", default=None, help="mutant ids to run")
    ap.add_argument("--module", action="append", default=None, help="run the mutants of this file (repeatable)")
    ap.add_argument("--changed", metavar="BASE", help="run the mutants of files changed since git BASE")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per mutant's test run")
    ap.add_argument("--tests", nargs="+", default=None,
                    help="run these test files for every selected mutant instead of each one's own (a 'before' run "
                         "against an older test suite)")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                    help="start no mutant after this many seconds (CI's time-bounded run); the rest are listed as "
                         "'not run (budget)' and do not fail the run")
    args = ap.parse_args(argv)
    # a SIGTERM unwinds like Ctrl-C: the mutated file is restored by run_mutant's `finally`, the tests are killed
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    todo = MUTANTS
    if args.only is not None:
        unknown = set(args.only) - {m.id for m in MUTANTS}
        if unknown:
            ap.error(f"unknown mutant ids: {', '.join(sorted(unknown))}")
        todo = [m for m in todo if m.id in args.only]
    if args.module:
        todo = [m for m in todo if m.file in args.module]
    if args.changed:
        changed = _changed(args.changed)
        todo = [m for m in todo if m.file in changed]
    if args.tests:
        todo = [Mutant(m.id, m.file, m.old, m.new, tuple(args.tests), m.equivalent) for m in todo]
    print("| mutant | file | result | seconds |")
    print("|---|---|---|---|")
    failed = 0
    counts: dict[str, list[int]] = {}
    start = time.monotonic()
    sandbox_here: tuple[bool, str] | None = None
    for m in todo:
        if args.list or m.equivalent:
            print(f"| {m.id} | {m.file} | {'equivalent: ' + m.equivalent if m.equivalent else 'listed'} | |")
            continue
        if m.file == SANDBOX:
            if sandbox_here is None:
                sandbox_here = _sandbox_own_fs()
            if not sandbox_here[0]:
                print(f"| {m.id} | {m.file} | not run (no sandbox with its own tmpfs here: {sandbox_here[1]}) | |")
                continue
        if args.budget is not None and time.monotonic() - start > args.budget:
            print(f"| {m.id} | {m.file} | not run (budget of {args.budget:g} s spent) | |")
            continue
        verdict, secs = run_mutant(m, args.timeout)
        killed = verdict.startswith("killed")
        failed += not killed
        c = counts.setdefault(m.file, [0, 0])
        c[0] += killed
        c[1] += 1
        print(f"| {m.id} | {m.file} | {verdict} | {secs:.0f} |", flush=True)
    if counts:
        print()
        for f, (k, n) in counts.items():
            print(f"{f}: {k}/{n} killed ({100 * k / n:.0f} %)")
        k, n = sum(c[0] for c in counts.values()), sum(c[1] for c in counts.values())
        print(f"all: {k}/{n} killed ({100 * k / n:.0f} %)")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
