"""No test without a claim (issue 39): every test function under tests/ states something that can fail.

Read from the source with `ast`, never by running the tests. A *test function* is a `def test_*` (sync or async)
at module level or in a `Test*` class of a `test_*.py` file. It makes a claim when its body (nested functions
and lambdas included) contains at least one of:

1. an `assert` statement, or a `raise` statement (a test or helper that raises on a failed condition);
2. a call of `pytest.raises`, `pytest.warns`, `pytest.fail` or `pytest.deprecated_call` (also imported bare);
3. a call of a function whose name starts with `assert` or `expect_` (`np.testing.assert_allclose`,
   `torch.testing.assert_close`, `unittest`'s `assertEqual`, ...);
4. a call of a helper defined in the test tree (any `.py` under tests/, methods and classes included) that makes
   a claim by these same rules, transitively, *made for its check*: the call is a `with` item, a statement of
   its own (its value discarded), a `return` value (a helper handing on a check), or the helper's name starts
   with `assert`/`check`/`expect`/`verify` (leading underscores ignored). A setup helper whose result the test
   uses (`cid, _ = _publish(ipfs)`) does not count, even when it asserts its own preconditions. A name passed
   to such a call counts too (a state-machine class whose methods assert). A call is resolved by the called
   name (`f(...)` or `obj.f(...)`): to the definitions of that name in the calling module when it has any,
   else to those of the module it was imported from (`from helpers import f as g`), else to every definition
   of that name in the tree; it counts when any of them makes a claim.

No name-prefix pass for product functions: `check_submission`, `check_aggregate`, ... return a verdict that a
test must still assert (the prefix rule of 4 applies only to helpers defined under tests/ that make a claim).
`pytest.skip`/`xfail` alone is no claim.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).parent
PYTEST_CLAIMS = {"raises", "warns", "fail", "deprecated_call"}
CLAIM_PREFIXES = ("assert", "expect_")
HELPER_PREFIXES = ("assert", "check", "expect", "verify")

Func = ast.FunctionDef | ast.AsyncFunctionDef


def _name(node: ast.expr) -> tuple[str, str] | None:
    """(qualifier, last name) of a called expression: `pytest.raises` -> ('pytest', 'raises'), `f` -> ('', 'f')."""
    if isinstance(node, ast.Name):
        return "", node.id
    if isinstance(node, ast.Attribute):
        base = node.value
        return (base.id if isinstance(base, ast.Name) else "?"), node.attr
    return None


class Module:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.tree = ast.parse(path.read_text(), filename=str(path))
        self.defs: dict[str, list[ast.AST]] = {}  # functions, methods and classes by name
        self.imported: dict[str, tuple[str, str]] = {}  # alias -> (module, its name there): `from X import a as b`
        for node in ast.walk(self.tree):
            if isinstance(node, Func | ast.ClassDef):
                self.defs.setdefault(node.name, []).append(node)
            elif isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    self.imported[alias.asname or alias.name] = (node.module.split(".")[-1], alias.name)

    def tests(self) -> Iterator[Func]:
        for node in self.tree.body:
            if isinstance(node, Func) and node.name.startswith("test_"):
                yield node
            elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                yield from (n for n in node.body if isinstance(n, Func) and n.name.startswith("test_"))


def _modules() -> dict[str, Module]:
    """Every module of the test tree by its path relative to tests/ (several `conftest.py`)."""
    return {str(p.relative_to(TESTS)): Module(p) for p in sorted(TESTS.rglob("*.py"))
            if "data" not in p.relative_to(TESTS).parts}


def _claim_positions(node: ast.AST) -> Iterator[ast.Call]:
    """Calls whose purpose is their check: `with f(...)`, `f(...)` as a statement, `return f(...)` (a helper
    handing its caller a check), `await f(...)` as a statement."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.With | ast.AsyncWith):
            yield from (i.context_expr for i in sub.items if isinstance(i.context_expr, ast.Call))
        elif isinstance(sub, ast.Expr | ast.Return) and sub.value is not None:
            value = sub.value.value if isinstance(sub.value, ast.Await) else sub.value
            if isinstance(value, ast.Call):
                yield value


def _direct(node: ast.AST, pytest_names: set[str]) -> tuple[bool, set[str]]:
    """Whether `node` makes a claim by rules 1-3, and the names that rule 4 may resolve: helpers called in a
    claim position (`_claim_positions`) or named like a claim, and names passed to those calls."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Assert | ast.Raise):
            return True, set()
        if isinstance(sub, ast.Call) and (got := _name(sub.func)) is not None:
            qual, name = got
            if (qual == "pytest" or (qual == "" and name in pytest_names)) and name in PYTEST_CLAIMS:
                return True, set()
            if name.startswith(CLAIM_PREFIXES):
                return True, set()
    candidates: set[str] = set()
    for call in _claim_positions(node):
        if (got := _name(call.func)) is not None:
            candidates.add(got[1])
        candidates.update(a.id for a in call.args if isinstance(a, ast.Name))  # a class or helper passed by name
    for sub in ast.walk(node):
        got = _name(sub.func) if isinstance(sub, ast.Call) else None
        if got is not None and got[1].lstrip("_").startswith(HELPER_PREFIXES):
            candidates.add(got[1])
    return False, candidates


class Claims:
    """Which definitions of the test tree make a claim (rules 1-4, to a fixpoint)."""

    def __init__(self, modules: dict[str, Module]) -> None:
        self.modules = modules
        self.by_stem: dict[str, list[Module]] = {}
        for m in modules.values():
            self.by_stem.setdefault(m.path.stem, []).append(m)
        self.facts: dict[int, tuple[bool, set[str], Module]] = {}
        for mod in modules.values():
            bare = {n for n, (src, _) in mod.imported.items() if src == "pytest"}
            for defs in mod.defs.values():
                for d in defs:
                    self.facts[id(d)] = (*_direct(d, bare), mod)
        self.claiming: set[int] = {k for k, (ok, _, _) in self.facts.items() if ok}
        changed = True
        while changed:
            changed = False
            for k, (_, called, mod) in self.facts.items():
                if k not in self.claiming and any(self._claims(mod, n) for n in called):
                    self.claiming.add(k)
                    changed = True

    def _resolve(self, mod: Module, name: str) -> list[ast.AST]:
        if name in mod.defs:
            return mod.defs[name]
        src, there = mod.imported.get(name, ("", name))
        srcs = [m for m in self.by_stem.get(src, []) if there in m.defs]
        if srcs:
            return [d for m in srcs for d in m.defs[there]]
        return [d for m in self.modules.values() for d in m.defs.get(name, [])]

    def _claims(self, mod: Module, name: str) -> bool:
        return any(id(d) in self.claiming for d in self._resolve(mod, name))

    def test_claims(self, mod: Module, test: Func) -> bool:
        ok, called, _ = self.facts[id(test)]
        return ok or any(self._claims(mod, n) for n in called)


def test_every_test_function_makes_a_claim() -> None:
    modules = _modules()
    claims = Claims(modules)
    empty = [f"{m.path.relative_to(TESTS.parent)}:{t.lineno} {t.name}"
             for m in modules.values() if m.path.name.startswith("test_")
             for t in m.tests() if not claims.test_claims(m, t)]
    assert not empty, "test functions without an assert, pytest.raises or a claiming helper:\n" + "\n".join(empty)


def test_the_rule_sees_claims_and_their_absence() -> None:
    """The checker itself: each rule on a small module (so a broken checker cannot pass the test above)."""
    src = '''
import pytest
from pytest import raises
def helper(x):
    assert x
def indirect(x):
    helper(x)
def quiet(x):
    return x
def setup():
    assert True
    return 1
def _check_value(x):
    assert x == 1
class Machine:
    def invariant(self):
        assert self
def test_assert(): assert 1
def test_raises():
    with pytest.raises(ValueError): int("x")
def test_bare_raises():
    with raises(ValueError): int("x")
def test_np(): np.testing.assert_allclose(1, 1)
def test_helper(): indirect(1)
def test_none(): quiet(1)
def test_setup_result_used():
    value = setup()
def test_setup_called_for_its_check(): setup()
def test_named_check_helper():
    ok = _check_value(1)
def test_machine(): run_state_machine(Machine)
def test_check_prefix_is_not_enough(): check_submission(1)
def test_skip_is_not_a_claim(): pytest.skip("no")
'''
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "test_probe.py"
        path.write_text(src)
        mod = Module(path)
        claims = Claims({"test_probe.py": mod})
        verdict = {t.name: claims.test_claims(mod, t) for t in mod.tests()}
    assert verdict == {"test_assert": True, "test_raises": True, "test_bare_raises": True, "test_np": True,
                       "test_helper": True, "test_none": False,
                       "test_setup_result_used": False, "test_setup_called_for_its_check": True,
                       "test_named_check_helper": True, "test_machine": True, "test_check_prefix_is_not_enough": False,
                       "test_skip_is_not_a_claim": False}
