"""Package layout for the one `intellect` namespace.

`intellect.sdk` lives in `sdk/`, `intellect.verifier` in `verifier/`, `intellect.agents` in
`agents/`. Subpackages are discovered here so that adding one needs no edit to packaging;
the rest of the metadata lives in pyproject.toml. Works for both normal and editable installs
(setuptools maps the folders through package_dir).
"""

from pathlib import Path

from setuptools import setup

ROOT = Path(__file__).parent
ROOTS = {"sdk": "intellect.sdk", "verifier": "intellect.verifier", "agents": "intellect.agents"}


def _discover() -> tuple[list[str], dict[str, str]]:
    packages: list[str] = []
    package_dir: dict[str, str] = {}
    for folder, name in ROOTS.items():
        for init in sorted((ROOT / folder).rglob("__init__.py")):
            rel = init.parent.relative_to(ROOT)
            if any(part.startswith((".", "_")) and part != "__init__.py" for part in rel.parts):
                continue
            pkg = ".".join([name, *rel.parts[1:]])
            packages.append(pkg)
        package_dir[name] = folder
    return packages, package_dir


packages, package_dir = _discover()
setup(packages=packages, package_dir=package_dir)
