"""No stand-ins for our own agents (issue 39): a test or bench drives the real agent class, or the function the
agent calls, never a fake `self`.

Read from the source with `ast`, never by running anything. The *agent classes* are `Agent` of
`agents/roles/_runtime.py` and every class under agents/ that derives from it; the *agent attributes* are what
`Agent.__init__` and `Agent.connect` set on `self` (`cfg`, `state`, `protocol`, `pool_id`, ...). A module of
tests/ or bench/ stands in for an agent where it:

1. calls `SimpleNamespace(...)` with an agent attribute as a keyword (`SimpleNamespace(protocol=p, pool_id=1)`;
   `pool_id` or `pool` alone is not enough: chain records carry them too);
2. assigns a `SimpleNamespace(...)` to an agent attribute (`validator.protocol = SimpleNamespace(...)`);
3. makes an agent class's instance without its `__init__` (`Validator.__new__(Validator)`,
   `object.__new__(Worker)`);
4. calls an agent class's method unbound (`Worker.pool_closed(fake)`): a method of the real instance is called
   on the instance.

The ceiling is 0: fix a new stand-in (construct the agent from a real config, as tests/roles do, or move the
logic into a function of the agent's module that both call) rather than raising it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("tests", "bench")
CEILING = 0
RECORD_FIELDS = {"pool_id", "pool"}  # agent attributes that on-chain records (a task, a node) also carry


def _agent_classes() -> dict[str, ast.ClassDef]:
    """`Agent` and every class under agents/ derived from it (by base name, to a fixpoint)."""
    classes: dict[str, list[ast.ClassDef]] = {}
    for path in sorted((ROOT / "agents").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ClassDef):
                classes.setdefault(node.name, []).append(node)
    found = {"Agent": classes["Agent"][0]}
    changed = True
    while changed:
        changed = False
        for name, defs in classes.items():
            for d in defs:
                bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in d.bases}
                if name not in found and bases & set(found):
                    found[name] = d
                    changed = True
    return found


def _agent_attributes(agent: ast.ClassDef) -> set[str]:
    """What `Agent.__init__` and `Agent.connect` set on `self`."""
    out: set[str] = set()
    for fn in agent.body:
        if isinstance(fn, ast.FunctionDef) and fn.name in ("__init__", "connect"):
            for node in ast.walk(fn):
                targets = node.targets if isinstance(node, ast.Assign) else (
                    [node.target] if isinstance(node, ast.AnnAssign) else [])
                out.update(t.attr for t in targets if isinstance(t, ast.Attribute)
                           and isinstance(t.value, ast.Name) and t.value.id == "self")
    return out


def _plain_methods(classes: dict[str, ast.ClassDef]) -> dict[str, set[str]]:
    """Each agent class's methods that take `self` (neither classmethod nor staticmethod), its own only."""
    out: dict[str, set[str]] = {}
    for name, cls in classes.items():
        out[name] = {f.name for f in cls.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                     and not any(isinstance(d, ast.Name) and d.id in ("classmethod", "staticmethod")
                                 for d in f.decorator_list)}
    return out


CLASSES = _agent_classes()
ATTRIBUTES = _agent_attributes(CLASSES["Agent"])
METHODS = _plain_methods(CLASSES)
INHERITED = set().union(*METHODS.values())  # a subclass's unbound call of a base method counts too


def _is_namespace(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and (
        (isinstance(node.func, ast.Name) and node.func.id == "SimpleNamespace")
        or (isinstance(node.func, ast.Attribute) and node.func.attr == "SimpleNamespace"))


def stand_ins(src: str) -> Iterator[tuple[int, str]]:
    """(line, source) of each stand-in for an agent in module source `src` (rules 1-4 of the docstring)."""
    for node in ast.walk(ast.parse(src)):
        if _is_namespace(node):
            assert isinstance(node, ast.Call)
            hits = {k.arg for k in node.keywords} & ATTRIBUTES
            if hits - RECORD_FIELDS or len(hits) > 1:
                yield node.lineno, ast.unparse(node)
        elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None and _is_namespace(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Attribute) and t.attr in ATTRIBUTES for t in targets):
                yield node.lineno, ast.unparse(node)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if not isinstance(owner, ast.Name):
                continue
            if node.func.attr == "__new__":
                made = [a.id for a in node.args if isinstance(a, ast.Name)]
                if owner.id in CLASSES or any(m in CLASSES for m in made):
                    yield node.lineno, ast.unparse(node)
            elif owner.id in CLASSES and node.func.attr in INHERITED and node.args:
                yield node.lineno, ast.unparse(node)


def _found() -> list[str]:
    out = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if "data" in rel.parts:
                continue
            out += [f"{rel}:{line}: {code}" for line, code in stand_ins(path.read_text())]
    return out


def test_no_module_stands_in_for_an_agent() -> None:
    found = _found()
    assert len(found) <= CEILING, "stand-ins for our own agents (construct the real agent, or call the function " \
        "it calls):\n" + "\n".join(found)


def test_the_walk_sees_the_agents_and_their_attributes() -> None:
    assert {"Agent", "Trainer", "Validator", "Worker", "RelayAgent"} <= set(CLASSES)
    assert {"cfg", "state", "protocol", "pool_id", "pool", "data_dir", "stop_event", "ipfs"} <= ATTRIBUTES
    assert {"pool_closed", "step_quota_used"} <= METHODS["Worker"] and "start_for" not in INHERITED


def test_the_rule_sees_stand_ins_and_lets_real_agents_pass() -> None:
    src = '''
from types import SimpleNamespace
import types
me = SimpleNamespace(protocol=w, pool_id=1)
v.protocol = SimpleNamespace(chain_time=lambda: 1000)
t = types.SimpleNamespace(cfg=cfg, state=state)
val = Validator.__new__(Validator)
w2 = object.__new__(Worker)
Worker.pool_closed(me)
Validator.status(me)
real = Worker(cfg)
real.pool_closed()
rows = SimpleNamespace(text="x", completion_ids=[1])
rules = SimpleNamespace(worker=SimpleNamespace(group_size=2))
rf = object.__new__(RolloutFile)
Trainer.role
task = SimpleNamespace(status=s, pool_id=1, node=n)
'''
    assert sorted(line for line, _ in stand_ins(src)) == [4, 5, 6, 7, 8, 9, 10]
