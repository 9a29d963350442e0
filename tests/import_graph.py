"""What the product's modules import, read from the source with `ast` (function-level imports included), for
the layout tests (`tests/agents/test_agents_layout.py`, `tests/sdk/test_sdk_layout.py`). `tests/conftest.py`
puts this folder on sys.path: `from import_graph import imports, modules, within`."""

from __future__ import annotations

import ast
from pathlib import Path


def modules(pkg: object) -> dict[str, Path]:
    """Every module of package `pkg` (subpackages included): dotted name -> source file."""
    root = Path(pkg.__path__[0])  # type: ignore[attr-defined]
    name = pkg.__name__  # type: ignore[attr-defined]
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join([name, *parts])] = path
    return out


def imports(module: str, path: Path, tree: ast.AST | None = None) -> set[str]:
    """Every module `module` imports, anywhere in its source (relative imports resolved)."""
    tree = tree or ast.parse(path.read_text(), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}
    return found


def within(name: str, prefix: str) -> bool:
    """`name` is module `prefix` or inside it."""
    return name == prefix or name.startswith(prefix + ".")
