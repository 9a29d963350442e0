"""One exception tree for the namespace: every error class of `intellect.*` is an `IntellectError`."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import intellect.agents
import intellect.sdk
import intellect.verifier
from intellect.sdk import ConfigError, IntellectError

# modules that need an optional engine this environment may not have
_OPTIONAL = {"vllm"}


def _modules() -> list[str]:
    names = []
    for pkg in (intellect.sdk, intellect.verifier, intellect.agents):
        names.append(pkg.__name__)
        names += [m.name for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")]
    return names


def _error_classes() -> list[type[BaseException]]:
    found: list[type[BaseException]] = []
    for name in _modules():
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            if exc.name in _OPTIONAL:
                continue
            raise
        found += [c for _, c in inspect.getmembers(module, inspect.isclass)
                  if issubclass(c, BaseException) and c.__module__ == name]
    return found


def test_every_error_class_is_an_intellect_error() -> None:
    classes = _error_classes()
    names = {c.__name__ for c in classes}
    # the walk reaches the verifier's and the agents' errors, not only the SDK's
    assert {"ToplocError", "TaskSetError", "RolloutFileError", "AttestationError", "EngineError",
            "AgentError", "StaleRolloutError"} <= names
    # control-flow signals that must pass through `except Exception` (the math judge's fuel and CPU limits)
    # derive from BaseException only; they never leave their module, so they are private
    signals = [c for c in classes if not issubclass(c, Exception)]
    assert all(c.__name__.startswith("_") for c in signals), signals
    outside = sorted(f"{c.__module__}.{c.__qualname__}" for c in classes
                     if issubclass(c, Exception) and not issubclass(c, IntellectError))
    assert outside == []


def test_one_config_error() -> None:
    from intellect.agents.config import ConfigError as AgentConfigError

    assert AgentConfigError is ConfigError
    assert issubclass(ConfigError, ValueError)  # `except ValueError` callers keep working
    others = [c for c in _error_classes() if c.__name__ == "ConfigError" and c is not ConfigError]
    assert others == []
