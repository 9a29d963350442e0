"""Fixtures for the verifier tests: a tiny random Llama (fast) and the real SmolLM2 (slow)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="session")
def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=300,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=True,
    )
    return LlamaForCausalLM(config).eval()


@pytest.fixture(scope="session")
def smollm2():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from intellect.verifier.models import smollm2_path

    path = smollm2_path()
    return AutoModelForCausalLM.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)
