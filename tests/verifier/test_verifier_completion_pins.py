"""The EOS set a completion must end on (issue 39, mutmut's survivors on `verifier/completion.py`): the model's
generation config and the tokenizer each may lack the attribute, and either may hold one id or a list."""

from __future__ import annotations

from types import SimpleNamespace

from intellect.verifier.completion import eos_token_ids


def test_eos_ids_of_a_model_without_generation_config_are_the_tokenizers():
    assert eos_token_ids(object(), SimpleNamespace(eos_token_id=2)) == frozenset({2})


def test_eos_ids_when_the_config_or_the_tokenizer_has_no_eos_attribute():
    model = SimpleNamespace(generation_config=SimpleNamespace())  # a config without eos_token_id
    assert eos_token_ids(model, SimpleNamespace(eos_token_id=[7, 8])) == frozenset({7, 8})
    model = SimpleNamespace(generation_config=SimpleNamespace(eos_token_id=(3, 4)))
    assert eos_token_ids(model, object()) == frozenset({3, 4})
    assert eos_token_ids(object(), object()) == frozenset()
