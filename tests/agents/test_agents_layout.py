"""The import rules of `intellect.agents`, read from the source with `ast` (function-level imports included):

- a role (`intellect.agents.roles.{worker,validator,trainer,relay}`) imports no other role, nothing of the
  demo (`intellect.agents.demo`: the swarm, its report, the learning experiment) and nothing of the
  attack kit (`intellect.agents.adversary`);
- no product module (the SDK, the verifier, the agents outside the demo and the attack kit) imports the
  attack kit;
- the acceptance rule (`intellect.verifier.submission`) and the rest of the verifier import no agent code.
"""

from __future__ import annotations

from import_graph import imports as _imports  # type: ignore[import-not-found]
from import_graph import modules as _modules
from import_graph import within as _within

import intellect.agents
import intellect.sdk
import intellect.verifier

ROLES = ("worker", "validator", "trainer", "relay")


ALL = {**_modules(intellect.sdk), **_modules(intellect.verifier), **_modules(intellect.agents)}
KIT = "intellect.agents.adversary"
DEMO = "intellect.agents.demo"


def test_the_layout_is_the_one_the_rules_speak_of() -> None:
    for role in ROLES:
        assert f"intellect.agents.roles.{role}" in ALL
    assert {KIT, DEMO, "intellect.agents.demo.learn", "intellect.verifier.submission",
            "intellect.verifier.rollouts"} <= set(ALL)


def test_no_role_imports_another_role_the_demo_or_the_attack_kit() -> None:
    bad = []
    for role in ROLES:
        me = f"intellect.agents.roles.{role}"
        others = [f"intellect.agents.roles.{r}" for r in ROLES if r != role]
        for imp in _imports(me, ALL[me]):
            if any(_within(imp, o) for o in [*others, DEMO, KIT]):
                bad.append(f"{me} imports {imp}")
    assert bad == []


def test_product_never_imports_the_attack_kit() -> None:
    bad = [f"{m} imports {imp}" for m, path in ALL.items()
           if not (_within(m, KIT) or _within(m, DEMO))
           for imp in _imports(m, path) if _within(imp, KIT)]
    assert bad == []


def test_the_acceptance_rule_imports_no_agent_code() -> None:
    bad = [f"{m} imports {imp}" for m in ("intellect.verifier.submission", "intellect.verifier.rollouts")
           for imp in _imports(m, ALL[m]) if _within(imp, "intellect.agents")]
    assert bad == []
