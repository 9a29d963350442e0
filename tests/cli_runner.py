"""The `intellect` CLI run in-process for tests (click's CliRunner isolation), shared by the test folders:
`tests/conftest.py` puts this folder on sys.path, so any test imports it as `from cli_runner import run_cli`."""

from __future__ import annotations

from click.testing import CliRunner


def run_cli(args: list[str], *, input: str | None = None, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of `intellect ARGS` (stdin from `input`, extra environment from `env`)."""
    from intellect.sdk.cli import main

    runner = CliRunner()
    with runner.isolation(input=input, env=env) as streams:
        code = 0
        try:
            main(args)
        except SystemExit as exc:
            code = int(exc.code or 0)
        out = streams[0].getvalue().decode()
        err = streams[1].getvalue().decode() if len(streams) > 1 and streams[1] is not None else ""
    return code, out, err
