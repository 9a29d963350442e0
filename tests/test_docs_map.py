"""The docs are a map that matches the ground (issue 34), read from README.md and docs/*.md:

- every repository path the docs name in backticks (`agents/roles/worker.py`, `tests/sdk/...py::test_x`,
  `docs/agents.md#anchor`) and every relative Markdown link exists;
- every code reference of the form `path.py: Name` or `path.py: Class.method` (docs/architecture.md's walk of a
  rollout uses it) names a function or class defined in that file;
- every documented `intellect ...` and `intellect-agent ...` command (backticks or a code block; `a|b`
  alternatives each) is a real command path whose `--help` runs (`tests/sdk/test_sdk_cli.py` runs `--help` on
  every command that exists; this checks the docs' commands exist).
"""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from intellect.agents.cli import main as agent_cli
from intellect.sdk.cli import cli as sdk_cli

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TOP = ("agents", "sdk", "verifier", "tests", "scripts", "bench", "fuzz", "tools", "contracts", "docs", "reports",
       "deployments")
_TICKS = re.compile(r"`([^`\n]+)`")
_PATH = re.compile(rf"^(?:{'|'.join(TOP)})/[\w./-]*\w$")
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_CODE_REF = re.compile(r"^([\w./-]+\.py): ([A-Za-z_][\w.]*)$")
_FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def _text(doc: Path) -> str:
    return doc.read_text()


_TEST_FILE = re.compile(r"^test_\w+\.py$")
_TEST_FILES = {p.name: p for p in (ROOT / "tests").rglob("test_*.py")}
# outputs of a command the docs describe, not files of the repository
OUTPUTS = {"deployments/84532.json"}


def _named_paths() -> list[tuple[str, str]]:
    """(doc, repository path) of each path in backticks; a bare `test_x.py` is looked up under tests/."""
    out = []
    for doc in DOCS:
        for tick in _TICKS.findall(_text(doc)):
            for word in tick.split():
                word = word.split("::")[0].split("#")[0].rstrip(":,.;)")
                if re.search(r":\d+(-\d+)?$", word):  # file.py:42
                    word = word.rsplit(":", 1)[0]
                if _TEST_FILE.match(word):
                    found = _TEST_FILES.get(word)
                    out.append((doc.name, str(found.relative_to(ROOT)) if found else f"tests/**/{word}"))
                elif _PATH.match(word) and not re.search(r"[*<>{}]", word) and word not in OUTPUTS:
                    out.append((doc.name, word))
    return out


def _named_tests() -> list[tuple[str, Path | None, str]]:
    """(doc, test file, test function) of each `file.py::test_name` in backticks."""
    out = []
    for doc in DOCS:
        for tick in _TICKS.findall(_text(doc)):
            for m in re.finditer(r"([\w./-]*test_\w+\.py)::(test_\w+)", tick):
                file = m.group(1)
                path = ROOT / file if "/" in file else _TEST_FILES.get(file)
                out.append((doc.name, path, m.group(2)))
    return out


def _links() -> list[tuple[str, Path]]:
    out = []
    for doc in DOCS:
        for target in _LINK.findall(_text(doc)):
            if "://" in target or target.startswith(("#", "mailto:")):
                continue
            out.append((doc.name, (doc.parent / target.split("#")[0]).resolve()))
    return out


def test_every_path_the_docs_name_exists() -> None:
    named = _named_paths()
    assert len(named) > 100  # the scan sees the docs
    missing = sorted({f"{doc}: {p}" for doc, p in named if not (ROOT / p).exists()})
    assert missing == []


def test_every_test_the_docs_name_exists() -> None:
    named = _named_tests()
    assert len(named) > 10
    bad = sorted({f"{doc}: {p.relative_to(ROOT) if p else '?'}::{name}" for doc, p, name in named
                  if p is None or not p.is_file() or not _defined(p, name)})
    assert bad == []


def test_every_relative_link_of_the_docs_exists() -> None:
    links = _links()
    assert len(links) > 20
    missing = sorted({f"{doc}: {p.relative_to(ROOT) if p.is_relative_to(ROOT) else p}" for doc, p in links
                      if not p.exists()})
    assert missing == []


def _defined(path: Path, dotted: str) -> bool:
    scope: list[ast.stmt] = ast.parse(path.read_text()).body
    for part in dotted.split("."):
        found = [n for n in scope if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                 and n.name == part]
        if not found:
            return False
        scope = found[0].body if isinstance(found[0], ast.ClassDef) else []
    return True


def test_every_code_reference_names_a_definition() -> None:
    refs = [(doc.name, m.group(1), m.group(2)) for doc in DOCS for tick in _TICKS.findall(_text(doc))
            if (m := _CODE_REF.match(tick.strip()))]
    assert len(refs) >= 20  # docs/architecture.md's walk
    bad = sorted(f"{doc}: {p}: {name}" for doc, p, name in refs
                 if not (ROOT / p).is_file() or not _defined(ROOT / p, name))
    assert bad == []


def _documented_commands() -> list[tuple[str, list[str]]]:
    lines: list[tuple[str, str]] = []
    for doc in DOCS:
        text = _text(doc)
        lines += [(doc.name, t) for t in _TICKS.findall(text)]
        for block in _FENCE.findall(text):
            lines += [(doc.name, ln) for ln in block.splitlines()[1:-1]]
    out = []
    for doc, line in lines:
        line = line.strip().removeprefix("$ ").split(" #")[0].rstrip("\\").strip()
        if not line.startswith(("intellect ", "intellect-agent ")) and line not in ("intellect", "intellect-agent"):
            continue
        try:
            words = shlex.split(line)
        except ValueError:
            words = line.split()
        out.append((doc, words))
    return out


def _paths(group: click.Command, words: list[str]) -> list[list[str]]:
    """The command paths `words` names under `group` (options and arguments skipped; `a|b` gives each)."""
    ctx = click.Context(group)
    i = 0
    while i < len(words):
        w = words[i]
        if w.startswith("-"):
            opt = next((p for p in group.params if isinstance(p, click.Option) and w.split("=")[0] in p.opts), None)
            i += 2 if opt is not None and not opt.is_flag and "=" not in w and not opt.count else 1
            continue
        if not isinstance(group, click.Group) or not re.fullmatch(r"[a-z][a-z0-9-]*(\|[a-z][a-z0-9-]*)*", w):
            break
        out = []
        for alt in w.split("|"):
            sub = group.get_command(ctx, alt)
            if sub is None:
                return [[f"<no command {alt!r}>"]]
            out += [[alt, *rest] for rest in _paths(sub, words[i + 1:])]
        return out
    return [[]]


def test_every_documented_command_exists_and_its_help_runs() -> None:
    documented = _documented_commands()
    assert len(documented) > 20
    seen: dict[tuple[str, ...], str] = {}
    for doc, words in documented:
        root = sdk_cli if words[0] == "intellect" else agent_cli
        for path in _paths(root, words[1:]):
            seen.setdefault((words[0], *path), doc)
    bad = []
    for (prog, *path), doc in sorted(seen.items()):
        if any(p.startswith("<no command") for p in path):
            bad.append(f"{doc}: {prog} {' '.join(path)}")
            continue
        result = CliRunner().invoke(sdk_cli if prog == "intellect" else agent_cli, [*path, "--help"])
        if result.exit_code != 0 or "Usage:" not in result.output:
            bad.append(f"{doc}: {prog} {' '.join(path)} --help: exit {result.exit_code}")
    assert bad == []


@pytest.mark.parametrize(("line", "want"), [
    ("intellect --keystore me.json node register --role worker", [["node", "register"]]),
    ("intellect pool show|checkpoints", [["pool", "show"], ["pool", "checkpoints"]]),
    ("intellect nodes show", [["<no command 'nodes'>"]]),
])
def test_the_command_reader_follows_groups_options_and_alternatives(line: str, want: list[list[str]]) -> None:
    assert _paths(sdk_cli, line.split()[1:]) == want
