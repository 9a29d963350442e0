"""A pool's evidence rules as a published document (issue 35: rules per model): canonical bytes, and a reader that
refuses what is not one by name."""

from __future__ import annotations

import json

import pytest

from intellect.sdk import SchemaVersionError
from intellect.verifier.evidence import (
    DEFAULT_RULES,
    FP32_RULES,
    MAX_RULES_BYTES,
    EvidenceRules,
    EvidenceRulesError,
    default_rules,
)


def test_round_trip_and_canonical_bytes() -> None:
    for rules in (DEFAULT_RULES, FP32_RULES):
        data = rules.to_bytes()
        back = EvidenceRules.from_bytes(data)
        assert back == rules and back.digest() == rules.digest() and back.to_bytes() == data
    # the same counts listed in another class order are the same rules: same bytes, same digest
    m = {"cpu-bf16": (100, 2, 1, 0, 0, 0, 0, 0, 0), "cpu-fp32": (103, 0, 0, 0, 0, 0, 0, 0, 0)}
    e = {"cpu-bf16": (5, 4, 3, 2, 1, 0, 0, 0, 0), "cpu-fp32": (15, 0, 0, 0, 0, 0, 0, 0, 0)}
    a = default_rules(m, e)
    b = default_rules(dict(reversed(m.items())), dict(reversed(e.items())))
    assert a.to_bytes() == b.to_bytes() and a.digest() == b.digest()
    assert a.digest() != DEFAULT_RULES.digest()


def _doc(**change: object) -> bytes:
    doc = json.loads(DEFAULT_RULES.to_bytes())
    doc.update(change)
    return json.dumps(doc).encode()


@pytest.mark.parametrize(("data", "error", "match"), [
    (b"\x00" * (MAX_RULES_BYTES + 1), EvidenceRulesError, "over the"),
    (b"{not json", EvidenceRulesError, "not a JSON document"),
    (b"[1, 2]", EvidenceRulesError, "is a JSON object, got list"),
    (_doc(schema="intellect.evidence-rules/v9"), SchemaVersionError, "evidence-rules/v9"),
    (_doc(false_alarm=2.0), EvidenceRulesError, "false_alarm"),
    (_doc(default_class="gpu-huge"), EvidenceRulesError, "gpu-huge"),
    (_doc(surprise=1), EvidenceRulesError, "surprise"),
    (DEFAULT_RULES.to_bytes().replace(b'"weight":0.01', b'"weight":NaN', 1), EvidenceRulesError, "NaN"),
])
def test_refuses_what_is_not_a_rules_document(data: bytes, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        EvidenceRules.from_bytes(data, source="pool 3's evidence rules")


def test_refuses_probabilities_that_do_not_sum_to_one() -> None:
    doc = json.loads(DEFAULT_RULES.to_bytes())
    honest = doc["components"][0]["honest"]["cpu-bf16"]
    honest[0] *= 0.5  # a pool owner's hand-edited histogram
    with pytest.raises(EvidenceRulesError, match="positive probabilities summing to 1"):
        EvidenceRules.from_bytes(json.dumps(doc).encode())

