"""The atheris harness every fuzz/fuzz_<reader>.py runs: `main(reader)` instruments the `intellect` package
(and so every reader's Python code, for coverage), then hands each input libFuzzer makes to the reader's
target in fuzz/targets.py. An exception out of the target (one the reader does not document, or a
`Finding`), a hang past -timeout or memory past -rss_limit_mb is a crash: libFuzzer writes the input to its
-artifact_prefix and exits non-zero. Run through fuzz/run.py, which sets those flags."""

from __future__ import annotations

import sys


def main(reader: str) -> None:
    import atheris

    with atheris.instrument_imports(include=["intellect"]):
        import targets  # imports every reader under instrumentation

        if targets.READERS[reader].prepare is not None:
            targets.READERS[reader].prepare()
    target = targets.READERS[reader].target

    def one_input(data: bytes) -> None:
        target(data)

    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
