"""`verifier/tasksets_cli.py`'s helpers pinned where mutmut's whole-module run found them loose (issue 39): the
command list with the lazy `filter`, the lazy command's import and its refusal, the JSON line and the root's --json
flag. docs/benchmarks-security.md ("mutmut") lists the mutants."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import click
import pytest

from intellect.verifier import tasksets_cli
from intellect.verifier.tasksets_cli import _emit, _json_flag, taskset

COMMANDS = ["convert", "filter", "gym", "merge", "publish", "split", "stats"]


def test_the_command_list_is_the_sorted_union_of_the_group_and_the_lazy_commands() -> None:
    ctx = click.Context(taskset)
    assert taskset.list_commands(ctx) == COMMANDS


def test_a_lazy_command_is_imported_when_asked_and_an_unknown_name_is_none() -> None:
    from intellect.agents.taskset_filter import filter_command

    ctx = click.Context(taskset)
    assert taskset.get_command(ctx, "filter") is filter_command
    assert taskset.get_command(ctx, "stats") is tasksets_cli.stats_cmd
    assert taskset.get_command(ctx, "nope") is None


def test_a_lazy_command_whose_module_is_missing_names_the_command_and_the_import_error(monkeypatch) -> None:
    monkeypatch.setitem(tasksets_cli.LAZY, "ghost", "intellect_no_such_module:cmd")
    with pytest.raises(click.ClickException) as err:
        taskset.get_command(click.Context(taskset), "ghost")
    assert err.value.message == ("`taskset ghost` needs the agents package (torch): "
                                 "No module named 'intellect_no_such_module'")
    assert err.value.__cause__ is None and err.value.__suppress_context__


def test_emit_prints_json_with_paths_as_text_or_the_line(capsys) -> None:
    _emit(True, {"output": Path("a/b.jsonl"), "tasks": 2}, "the line")
    _emit(False, {"output": Path("a/b.jsonl")}, "the line")
    assert capsys.readouterr().out == '{"output": "a/b.jsonl", "tasks": 2}\nthe line\n'


@pytest.mark.parametrize(("obj", "want"), [(None, False), (SimpleNamespace(), False),
                                           (SimpleNamespace(json=False), False), (SimpleNamespace(json=True), True),
                                           (SimpleNamespace(json=1), True)])
def test_the_json_flag_is_the_root_contexts_json_attribute_false_when_absent(obj, want) -> None:
    root = click.Context(click.Group("intellect"), obj=obj)
    child = click.Context(taskset, parent=root)
    assert _json_flag(child) is want


def test_a_lazy_commands_module_is_what_comes_before_the_first_colon(monkeypatch) -> None:
    monkeypatch.setitem(tasksets_cli.LAZY, "ghost", "intellect_no_such_module:a:b")
    with pytest.raises(click.ClickException, match=r"No module named 'intellect_no_such_module'$"):
        taskset.get_command(click.Context(taskset), "ghost")
