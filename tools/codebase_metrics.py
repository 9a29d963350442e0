"""The shape of the product's Python, read from the source with `ast` (issue 34): the figures a newcomer feels.

Usage:
    python tools/codebase_metrics.py            # the figures and their lists, as text
    python tools/codebase_metrics.py --json     # the same as one JSON object

The product is `sdk/` (`intellect.sdk`), `verifier/` (`intellect.verifier`) and `agents/` (`intellect.agents`).
Figures (`Figures`), each with the issue's target:

- `largest_class`: the longest class of the product, in lines (`end_lineno - lineno + 1`, decorators not
  counted). Target ≤ 450 (the SDK's `Protocol` may be split by concern).
- `role_classes`: lines of each role's class (`Trainer`, `Validator`, `Worker`, `RelayAgent` in
  `agents/roles/<role>.py`). Target ≤ 400 each.
- `inner_imports`: `import`/`from ... import` statements of our own modules (`intellect.*`, relative ones)
  inside a function of the product. Target ≤ 20, each deliberate (a heavy optional dependency such as torch,
  vllm or transformers deferred on purpose, said in a comment where it happens).
- `private_sdk_imports`: imports of a private SDK module (`intellect.sdk._x`, `intellect.sdk.ipfs._cid`,
  `from intellect.sdk import _x`, also `__import__`/`importlib.import_module` of such a name) from outside
  `sdk/`: in agents/, verifier/, scripts/, bench/, fuzz/ (`private_sdk_imports`) and in tests/
  (`private_sdk_imports_tests`, counted apart: a unit test of a private piece may need one). Target 0.
- `long_functions`: functions (methods included) of 80 lines or more in the product. Target ≤ 5.

`tests/test_codebase_metrics.py` holds the committed ceilings and fails when a figure gets worse.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# folder -> import name of the product's packages
PRODUCT = {"sdk": "intellect.sdk", "verifier": "intellect.verifier", "agents": "intellect.agents"}
# folders outside the SDK whose imports of its private modules are counted
OUTSIDE_SDK = ("agents", "verifier", "scripts", "bench", "fuzz", "tests")
ROLE_CLASSES = {"trainer": "Trainer", "validator": "Validator", "worker": "Worker", "relay": "RelayAgent"}
LONG_FUNCTION = 80  # lines

Func = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass
class Figures:
    largest_class: int = 0
    largest_class_name: str = ""
    role_classes: dict[str, int] = field(default_factory=dict)
    inner_imports: list[str] = field(default_factory=list)
    private_sdk_imports: list[str] = field(default_factory=list)  # from agents, verifier, scripts, bench, fuzz
    private_sdk_imports_tests: list[str] = field(default_factory=list)  # from tests/
    long_functions: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, int]:
        """The figures the ceilings hold: one number each."""
        return {"largest_class": self.largest_class,
                **{f"role_{r}": n for r, n in sorted(self.role_classes.items())},
                "inner_imports": len(self.inner_imports),
                "private_sdk_imports": len(self.private_sdk_imports),
                "private_sdk_imports_tests": len(self.private_sdk_imports_tests),
                "long_functions": len(self.long_functions)}


def _lines(node: ast.AST) -> int:
    return node.end_lineno - node.lineno + 1  # type: ignore[attr-defined,operator]


def _module_name(path: Path, folder: str, package: str) -> str:
    parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([package, *parts])


def _sources(folder: str) -> Iterator[Path]:
    yield from (p for p in sorted((ROOT / folder).rglob("*.py")) if "node_modules" not in p.parts)


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _in_functions(tree: ast.AST) -> Iterator[ast.stmt]:
    """Import statements nested in a function body (at any depth)."""
    def walk(node: ast.AST, inside: bool) -> Iterator[ast.stmt]:
        for child in ast.iter_child_nodes(node):
            if inside and isinstance(child, ast.Import | ast.ImportFrom):
                yield child
            yield from walk(child, inside or isinstance(child, Func | ast.Lambda))
    yield from walk(tree, False)


def _own(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        return bool(node.level) or (node.module or "").split(".")[0] == "intellect"
    return any(a.name.split(".")[0] == "intellect" for a in node.names)


def _private(dotted: str) -> bool:
    """`intellect.sdk.<...>._x<...>`: a module (or name) of the SDK whose path has a private part."""
    parts = dotted.split(".")
    return parts[:2] == ["intellect", "sdk"] and any(p.startswith("_") and not p.startswith("__") for p in parts[2:])


def _private_imports(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of every reach into a private SDK module: import statements (a private module, or a
    private module imported by name from a package), and `__import__`/`importlib.import_module` of a string."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names if _private(a.name))
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if _private(node.module):
                yield node.lineno, node.module
            else:
                yield from ((node.lineno, f"{node.module}.{a.name}") for a in node.names
                            if _private(f"{node.module}.{a.name}") and a.name[:1] == "_")
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            arg = node.args[0].value
            if name in {"__import__", "import_module"} and isinstance(arg, str) and _private(arg):
                yield node.lineno, arg


def measure(root: Path = ROOT) -> Figures:
    """Walk the product (and the folders around it, for private SDK imports) and return the figures."""
    figures = Figures()
    for folder, package in PRODUCT.items():
        for path in _sources(folder):
            rel = path.relative_to(root)
            module = _module_name(path, folder, package)
            tree = _parse(path)
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef) and _lines(node) > figures.largest_class:
                    figures.largest_class, figures.largest_class_name = _lines(node), f"{module}.{node.name}"
                if isinstance(node, Func) and _lines(node) >= LONG_FUNCTION:
                    figures.long_functions.append(f"{rel}:{node.lineno} {node.name} ({_lines(node)} lines)")
            figures.inner_imports += [f"{rel}:{n.lineno} {ast.unparse(n)}" for n in _in_functions(tree) if _own(n)]
            if folder == "agents" and path.parent.name == "roles" and path.stem in ROLE_CLASSES:
                for node in tree.body:
                    if isinstance(node, ast.ClassDef) and node.name == ROLE_CLASSES[path.stem]:
                        figures.role_classes[path.stem] = _lines(node)
    for folder in OUTSIDE_SDK:
        for path in _sources(folder):
            rel = path.relative_to(root)
            found = [f"{rel}:{line} {name}" for line, name in _private_imports(_parse(path))]
            if folder == "tests":
                figures.private_sdk_imports_tests += found
            else:
                figures.private_sdk_imports += found
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    figures = measure()
    if args.json:
        json.dump({"summary": figures.summary(), **asdict(figures)}, sys.stdout, indent=1)
        print()
        return 0
    print(f"largest class: {figures.largest_class} lines ({figures.largest_class_name})")
    for role, n in sorted(figures.role_classes.items()):
        print(f"role class {role}: {n} lines")
    for title, items in (("imports of our own modules inside functions", figures.inner_imports),
                         ("imports of private SDK modules from outside sdk/ and tests/", figures.private_sdk_imports),
                         ("imports of private SDK modules from tests/", figures.private_sdk_imports_tests),
                         (f"functions of {LONG_FUNCTION} lines or more", figures.long_functions)):
        print(f"{title}: {len(items)}")
        for item in items:
            print(f"  {item}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
