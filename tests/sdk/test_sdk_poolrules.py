"""Pool rules (intellect.poolrules/v1) and `intellect pool create | fund | defund | show` (issue 17)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_runner import run_cli

from intellect.sdk import SchemaVersionError
from intellect.sdk.devnet import Devnet
from intellect.sdk.ipfs import EmbeddedIpfs, compute_cid
from intellect.sdk.poolrules import POOLRULES_SCHEMA, PoolRules, PoolRulesError, conflicts

GOOD: dict[str, Any] = {
    "schema": POOLRULES_SCHEMA, "taskset_cid": compute_cid(b"train"), "heldout_cid": compute_cid(b"held"),
    "model": {"family": "smollm2-135m", "chat_template": "model"}, "group_size": 4, "problems_per_task": 2,
    "budgets": {"cpu": [64, 128], "gpu-large": [1024]}, "length_alpha": 0.0003,
    "sampler": {"temperature": 1.0}, "toploc_profile": "fp32", "max_units_per_submission": 8192,
}


def test_rules_roundtrip_and_canonical_cid() -> None:
    rules = PoolRules.build(GOOD)
    again = PoolRules.from_bytes(rules.to_bytes(), source="x")
    assert again == rules and again.cid() == rules.cid() == compute_cid(rules.to_bytes())
    shuffled = dict(reversed(list(GOOD.items())))
    assert PoolRules.build(shuffled).cid() == rules.cid()  # key order does not change the CID
    assert rules.max_budget == 1024 and rules.budgets_for("gpu-small") == [64, 128]
    assert PoolRules.is_rules_document(rules.to_bytes())
    assert not PoolRules.is_rules_document(b'{"name": "x", "schema": "intellect.taskset/v1"}\n')


def test_assigned_validators_is_a_rule_and_old_documents_keep_their_cid() -> None:
    """Issue 22: how many validators the chain assigns each submission. Unset (quorum + 1) it is not written,
    so a document made before the field existed has the same bytes and CID."""
    rules = PoolRules.build(GOOD)
    assert rules.assigned_validators is None and b"assigned_validators" not in rules.to_bytes()
    # the fields a document had before issue 22 (+ issue 17's length_scope and problem_order, written for new
    # documents)
    assert set(json.loads(rules.to_bytes())) == set(GOOD) | {"length_scope", "problem_order"}
    five = PoolRules.build({**GOOD, "assigned_validators": 5})
    assert five.cid() != rules.cid() and PoolRules.from_bytes(five.to_bytes()).assigned_validators == 5
    for bad in (0, 65):
        with pytest.raises(PoolRulesError) as err:
            PoolRules.build({**GOOD, "assigned_validators": bad})
        assert "assigned_validators" in str(err.value)


@pytest.mark.parametrize(("field", "new_value", "stored_value"), [
    ("length_scope", "solved", "all"),  # the length penalty on solved completions only; before: every completion
    ("problem_order", "epochs", "random"),  # seeded passes over the task set; before: drawn from each claim's seed
])
def test_new_documents_get_the_new_rule_and_stored_ones_keep_theirs_and_their_cid(
        field: str, new_value: str, stored_value: str) -> None:
    """Issue 17: a rule added after pools were published: a new document gets (and writes) the new value; a stored
    document made before the field (without it) is read with the old rule and keeps its bytes and CID, so its
    pool's submissions are judged as they were created; a local setting of the new value then conflicts."""
    new = PoolRules.build(GOOD)
    assert getattr(new, field) == new_value and json.loads(new.to_bytes())[field] == new_value
    assert getattr(PoolRules.from_bytes(new.to_bytes()), field) == new_value
    doc = json.loads(new.to_bytes())
    del doc[field]
    old_bytes = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()  # as written before the field
    old = PoolRules.from_bytes(old_bytes)
    assert getattr(old, field) == stored_value and old.to_bytes() == old_bytes and old.cid() == compute_cid(old_bytes)
    assert PoolRules.build({**GOOD, field: stored_value}).cid() == old.cid()
    assert conflicts(old, {field: new_value}) == [f"{field}: local {new_value!r}, pool rules {stored_value!r}"]
    assert conflicts(new, {field: new_value}) == []
    with pytest.raises(PoolRulesError) as err:
        PoolRules.build({**GOOD, field: "wrong"})
    assert field in str(err.value)


def test_budget_class_rule_fields_keep_old_cids_and_conflict_by_meaning() -> None:
    """Issue 21: the budget-class rule (`class_history`, `class_lease_share`) unset is its default and not
    written, so documents made before it keep their bytes and CID; a local setting conflicts by meaning."""
    rules = PoolRules.build(GOOD)
    data = rules.to_bytes()
    assert b"class_history" not in data and b"class_lease_share" not in data
    assert (rules.effective_class_history, rules.effective_class_lease_share) == (4, 0.5)
    off = PoolRules.build({**GOOD, "class_history": 0, "class_lease_share": 0.25})
    back = PoolRules.from_bytes(off.to_bytes())
    assert off.cid() != rules.cid() and (back.class_history, back.class_lease_share) == (0, 0.25)
    assert conflicts(rules, {"class_history": 4, "class_lease_share": None}) == []
    assert conflicts(rules, {"class_history": 2}) == ["class_history: local 2, pool rules 4"]
    assert conflicts(off, {"class_lease_share": 0.5}) == ["class_lease_share: local 0.5, pool rules 0.25"]
    for field, bad in (("class_history", 65), ("class_history", -1), ("class_lease_share", 0),
                       ("class_lease_share", 1.5)):
        with pytest.raises(PoolRulesError) as err:
            PoolRules.build({**GOOD, field: bad})
        assert field in str(err.value)


def test_default_quorum_is_above_one_off_development_chains() -> None:
    from intellect.sdk.cli import default_quorum

    class Chain:
        def __init__(self, dev: bool, floor: int) -> None:
            self.is_dev_chain, self._floor = dev, floor

        def pool_bounds(self) -> tuple[int, int]:
            return 10**19, self._floor

    assert default_quorum(Chain(True, 1)) == 1
    assert default_quorum(Chain(False, 1)) == 2  # a ledger deployed with floor 1 off a dev chain still gets 2
    assert default_quorum(Chain(False, 3)) == 3  # base-sepolia / base-mainnet profiles: minQuorum 3


@pytest.mark.parametrize(("change", "field"), [
    ({"max_units_per_submission": 8191}, "max_units_per_submission 8191 is below the largest budget 1024"),
    ({"budgets": {"gpu-large": [64]}}, "budgets: budgets needs a 'cpu' entry"),
    ({"budgets": {"cpu": [0]}}, "budgets["),
    ({"heldout_cid": compute_cid(b"train")}, "heldout_cid equals taskset_cid"),
    ({"group_size": 1}, "group_size"),
    ({"sampler": {"temperature": 0}}, "sampler.temperature"),
    ({"extra_field": 1}, "extra_field"),
])
def test_self_contradicting_or_bad_rules_refused_naming_the_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(PoolRulesError) as err:
        PoolRules.build({**GOOD, **change}, source="rules.json")
    assert field in str(err.value) and str(err.value).startswith("rules.json: ")


def test_new_rules_refused_when_a_short_solved_answer_scores_as_an_unsolved_one() -> None:
    """Issue 17: with the cap at the target a solved answer of length L scores 1 − α·(target − L), ≤ 0 (an
    unsolved answer's score) when α × the largest budget ≥ 1. A new document with such rules is refused; a
    stored one still loads (nothing already accepted is lost)."""
    doc = {**GOOD, "length_alpha": 0.005, "budgets": {"cpu": [256]}}
    with pytest.raises(PoolRulesError) as err:
        PoolRules.build_new(doc, source="rules.json")
    msg = str(err.value)
    assert msg.startswith("rules.json: length_alpha 0.005 × the largest budget 256 = 1.28 ≥ 1"), msg
    assert "below 1/256 = 0.00390625" in msg
    edge = {**doc, "length_alpha": 1 / 256}  # exactly 1: a 0-length solved answer would tie an unsolved one
    with pytest.raises(PoolRulesError):
        PoolRules.build_new(edge)
    assert PoolRules.build_new({**doc, "budgets": {"cpu": [64]}}).max_budget == 64  # 0.32
    assert PoolRules.build_new({**doc, "length_alpha": 0.0039}).length_alpha == 0.0039
    stored = PoolRules.build(doc)  # made before the check: still a valid document when read
    assert PoolRules.from_bytes(stored.to_bytes(), source="cid").length_alpha == 0.005
    assert stored.new_document_problems() and not PoolRules.build(GOOD).new_document_problems()


def test_from_bytes_refuses_other_schemas_and_garbage() -> None:
    with pytest.raises(SchemaVersionError):
        PoolRules.from_bytes(json.dumps({**GOOD, "schema": "intellect.poolrules/v9"}).encode(), source="cid")
    for data in (b"\xff\xfe", b"[1]", b"{" * 100000):
        with pytest.raises(PoolRulesError):
            PoolRules.from_bytes(data, source="cid")


def test_conflicts_name_each_contradicting_field() -> None:
    rules = PoolRules.build(GOOD)
    assert conflicts(rules, {"group_size": 4, "length_alpha": 0.0003, "budgets": {"gpu-large": [1024],
                                                                                  "cpu": [64, 128]}}) == []
    got = conflicts(rules, {"group_size": 8, "temperature": 0.7, "toploc_profile": "reference"})
    assert [g.split(":")[0] for g in got] == ["group_size", "temperature", "toploc_profile"]
    assert "local 8, pool rules 4" in got[0]


def _run(args: list[str]) -> tuple[int, str]:
    """Exit code and stdout (+ stderr after it when the command failed)."""
    code, out, err = run_cli(args)
    return code, out if code == 0 else out + err


def _taskset_file(path: Path, name: str, answers: list[str]) -> Path:
    lines = [json.dumps({"name": name, "schema": "intellect.taskset/v1"}, sort_keys=True)]
    lines += [json.dumps({"answer": a, "id": f"{name}-{i}", "prompt": f"What is {a} + 0?", "source": "test",
                          "verifier": "math"}, sort_keys=True) for i, a in enumerate(answers)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_cli_pool_create_dry_run_refuses_contradicting_rules(tmp_path: Path) -> None:
    base = ["pool", "create", "--dry-run", "--taskset", compute_cid(b"t"), "--model-family", "tiny",
            "--group-size", "4", "--problems-per-task", "2", "--budget", "cpu=64,128", "--length-alpha", "0",
            "--ipfs", f"embedded:{tmp_path / 'ipfs'}"]
    code, out = _run([*base, "--max-units", "1000"])
    assert code == 2 and "max_units_per_submission 1000 is below" in out, out
    code, out = _run(["--json", *base])
    assert code == 0, out
    doc = json.loads(out)
    assert doc["rules"]["max_units_per_submission"] == 1024 and doc["rules_cid"] == PoolRules.build(doc["rules"]).cid()
    assert not (tmp_path / "ipfs").exists() or not EmbeddedIpfs(tmp_path / "ipfs").has(doc["rules_cid"])


def test_cli_pool_create_length_scope_reads_back(tmp_path: Path) -> None:
    """`--length-scope all` gives a document whose scope reads back as `all` (the canonical bytes leave the
    field out, as a document made before it); the default is `solved`, written into the document."""
    base = ["--json", "pool", "create", "--dry-run", "--taskset", compute_cid(b"t"), "--model-family", "tiny",
            "--group-size", "4", "--problems-per-task", "2", "--budget", "cpu=64", "--length-alpha", "0.001",
            "--ipfs", f"embedded:{tmp_path / 'ipfs'}"]
    scopes = {}
    for extra in ([], ["--length-scope", "all"], ["--length-scope", "solved"]):
        code, out = _run([*base, *extra])
        assert code == 0, out
        doc = json.loads(out)
        data = json.dumps(doc["rules"], sort_keys=True, separators=(",", ":")).encode()
        rules = PoolRules.from_bytes(data, source="x")
        assert rules.cid() == doc["rules_cid"] == compute_cid(data)
        scopes[tuple(extra)] = (rules.length_scope, doc["rules"].get("length_scope"))
    assert scopes[()] == scopes[("--length-scope", "solved")] == ("solved", "solved")
    assert scopes[("--length-scope", "all")] == ("all", None)
    code, out = _run([*base, "--length-scope", "some"])
    assert code == 2 and "--length-scope" in out, out
    # a published `all` document given back as --rules keeps its meaning (its bytes leave the field out)
    published = tmp_path / "published.json"
    published.write_text(json.dumps(json.loads(_run([*base, "--length-scope", "all"])[1])["rules"]))
    code, out = _run(["--json", "pool", "create", "--dry-run", "--rules", str(published),
                      "--ipfs", f"embedded:{tmp_path / 'ipfs'}"])
    assert code == 0, out
    assert "length_scope" not in json.loads(out)["rules"]  # still `all`: the same document
    code, out = _run([*base, "--problem-order", "random"])
    assert code == 0 and "problem_order" not in json.loads(out)["rules"], out  # as a document before the field
    published.write_text(json.dumps(json.loads(out)["rules"]))
    code, out = _run(["--json", "pool", "create", "--dry-run", "--rules", str(published),
                      "--ipfs", f"embedded:{tmp_path / 'ipfs'}"])
    assert code == 0 and "problem_order" not in json.loads(out)["rules"], out  # still `random`
    assert json.loads(_run(base)[1])["rules"]["problem_order"] == "epochs"
    code, out = _run([*base, "--problem-order", "adaptive"])  # online difficulty filtering (issue 37)
    assert code == 0 and json.loads(out)["rules"]["problem_order"] == "adaptive", out


def test_cli_pool_create_refuses_alpha_times_budget_at_least_one(tmp_path: Path) -> None:
    base = ["pool", "create", "--dry-run", "--taskset", compute_cid(b"t"), "--model-family", "tiny",
            "--group-size", "4", "--problems-per-task", "2", "--length-alpha", "0.005",
            "--ipfs", f"embedded:{tmp_path / 'ipfs'}"]
    code, out = _run([*base, "--budget", "cpu=64,256"])
    assert code == 2 and "length_alpha 0.005 × the largest budget 256" in out and "0.00390625" in out, out
    code, out = _run([*base, "--budget", "cpu=64"])
    assert code == 0, out


def test_cli_pool_create_fund_defund_show(net: Devnet, tmp_path: Path) -> None:
    chain = ["--network", net.url, "--deployment", str(net.deployment_file), "--dev-account", "0"]
    store = f"embedded:{tmp_path / 'ipfs'}"
    train = _taskset_file(tmp_path / "train.jsonl", "train", ["1", "2", "3"])
    held = _taskset_file(tmp_path / "held.jsonl", "held", ["4"])
    code, out = _run([*chain, "--json", "pool", "create", "--taskset", str(train), "--heldout", str(held),
                      "--model-family", "tiny-llama", "--group-size", "4", "--problems-per-task", "2",
                      "--budget", "cpu=6,8", "--budget", "gpu-large=12,16", "--length-alpha", "0",
                      "--length-scope", "all", "--window", "300", "--vote-period", "120", "--lease", "600",
                      "--fund", "100", "--ipfs", store])
    assert code == 0, out
    created = json.loads(out.strip().splitlines()[-1])
    pool_id, rules_cid = created["pool_id"], created["rules_cid"]
    assert created["taskset_cid"] == compute_cid(train.read_bytes()) and created["budget"] == 100 * 10**18

    p = net.protocol(0)
    pool = p.pool(pool_id)
    assert pool.params.rules_cid == rules_cid and pool.params.max_units_per_submission == 16 * 4 * 2
    ipfs = EmbeddedIpfs(tmp_path / "ipfs")
    rules = PoolRules.from_bytes(ipfs.cat(rules_cid), source=rules_cid)  # the chain's CID resolves to the rules
    assert ipfs.cat(rules.taskset_cid) == train.read_bytes() and ipfs.cat(rules.heldout_cid or "") == held.read_bytes()

    assert pool.params.quorum == 1  # the default on a development chain

    code, out = _run([*chain, "pool", "create", "--taskset", str(train), "--model-family", "tiny-llama",
                      "--group-size", "4", "--problems-per-task", "2", "--budget", "cpu=6,8", "--length-alpha", "0",
                      "--window", "300", "--vote-period", "120", "--lease", "600", "--ipfs", store,
                      "--quorum", "2", "--assigned-validators", "1"])
    assert code == 2 and "assigned_validators 1 is below the quorum 2" in out, out
    code, out = _run([*chain, "--json", "pool", "show", str(pool_id), "--ipfs", store])
    assert code == 0, out
    shown = json.loads(out)["rules"]
    assert shown["group_size"] == 4 and shown["length_scope"] == "all", out  # shown though not in the bytes
    assert shown["problem_order"] == "epochs", out
    assert rules.length_scope == "all" and b"length_scope" not in ipfs.cat(rules_cid)
    code, out = _run([*chain, "--json", "pool", "defund", str(pool_id), "40"])
    assert code != 0 and "TaskLedgerDefundNotAnnounced" in out, out  # announced a lease duration ahead (issue 33)
    code, out = _run([*chain, "--json", "pool", "defund", str(pool_id), "40", "--announce"])
    assert code == 0 and json.loads(out)["executable_at"] > 0, out
    net.increase_time(601)
    code, out = _run([*chain, "--json", "pool", "defund", str(pool_id), "40"])
    assert code == 0 and json.loads(out)["budget"] == 60 * 10**18, out
    code, out = _run([*chain, "--json", "pool", "fund", str(pool_id), "5"])
    assert code == 0 and json.loads(out)["budget"] == 65 * 10**18, out

    # what the pool pays its validators (issue 33): per attestation and per resolved challenge, each set once
    bond = p.pool(pool_id).params.challenge_bond
    code, out = _run([*chain, "pool", "validator-pay", str(pool_id), "--per-challenge", str(bond // 10**18)])
    assert code != 0 and "AttesterBookVoterRewardTooHigh" in out, out  # at the bond: refused by name
    code, out = _run([*chain, "--json", "pool", "validator-pay", str(pool_id), "--per-attestation", "2",
                      "--per-challenge", "3", "--fund", "20"])
    assert code == 0, out
    assert json.loads(out) == {"pool_id": pool_id, "reward_per_attestation": 2 * 10**18,
                               "reward_per_challenge": 3 * 10**18, "budget": 20 * 10**18}, out
    code, out = _run([*chain, "pool", "validator-pay", str(pool_id)])
    assert code == 0 and "3 INTL per resolved challenge, budget 20 INTL" in out, out
    code, out = _run([*chain, "pool", "validator-pay", str(pool_id), "--per-challenge", "1"])
    assert code != 0 and "AttesterBookVoterRewardAlreadySet" in out, out


def test_evidence_rules_cid_is_optional_and_left_out_when_none(tmp_path: Path) -> None:
    """A pool names its evidence rules by CID (issue 35: calibrated on its model); a document without the field
    keeps its bytes and CID, one with it reads it back."""
    without = PoolRules.build(GOOD)
    assert "evidence_rules_cid" not in json.loads(without.to_bytes())
    with_ = PoolRules.build({**GOOD, "evidence_rules_cid": compute_cid(b"rules")})
    assert with_.cid() != without.cid()
    assert PoolRules.from_bytes(with_.to_bytes()).evidence_rules_cid == compute_cid(b"rules")


def test_cli_pool_create_evidence_rules_file(tmp_path: Path) -> None:
    """`pool create --evidence-rules FILE` adds the file to IPFS and names its CID in the rules; a file of another
    schema is refused by name, before anything is published."""
    base = ["--json", "pool", "create", "--dry-run", "--taskset", compute_cid(b"t"), "--model-family", "smollm2-135m",
            "--group-size", "4", "--problems-per-task", "2", "--budget", "cpu=64", "--length-alpha", "0.001",
            "--ipfs", f"embedded:{tmp_path / 'ipfs'}"]
    good = tmp_path / "smollm2-evidence.json"
    good.write_bytes(json.dumps({"schema": "intellect.evidence-rules/v1", "components": []}).encode())
    code, out = _run([*base, "--evidence-rules", str(good)])
    assert code == 0, out
    assert json.loads(out)["rules"]["evidence_rules_cid"] == compute_cid(good.read_bytes())
    bad = tmp_path / "poolrules.json"
    bad.write_text(json.dumps({"schema": POOLRULES_SCHEMA}))
    code, out = _run([*base, "--evidence-rules", str(bad)])
    assert code != 0 and "--evidence-rules" in out and "intellect.evidence-rules/v1" in out, out
    code, out = _run([*base, "--evidence-rules", compute_cid(b"published elsewhere")])
    assert code == 0 and compute_cid(b"published elsewhere") in out, out
