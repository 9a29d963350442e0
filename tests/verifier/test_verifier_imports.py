"""`import intellect.verifier` and its light modules must not load torch."""

from __future__ import annotations

import subprocess
import sys


def test_light_modules_import_without_torch():
    code = (
        "import sys\n"
        "import intellect.verifier, intellect.verifier.tasks, intellect.verifier.rewards\n"
        "import intellect.verifier.sandbox, intellect.verifier.toploc, intellect.verifier.models\n"
        "import intellect.verifier.replay\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
