"""`check_completion_end` as a whole (issue 39, mutmut on all of `verifier/completion.py`): each refusal's reason
and its exact detail (the text a worker sees in the rejection), the EOS scan up to the last token and no
further, and the empty detail of an accepted completion."""

from __future__ import annotations

from intellect.verifier.completion import CompletionEnd, EndError, check_completion_end

EOS = {2}


def test_accepted_completion_has_no_error_and_an_empty_detail():
    end = check_completion_end([5, 6, 2], EOS, 8)
    assert end.ok is True
    assert end.error is None
    assert end.detail == ""
    assert CompletionEnd(None).detail == ""  # the default detail itself
    assert CompletionEnd(EndError.CUT_SHORT, "why").detail == "why"
    assert CompletionEnd(EndError.CUT_SHORT, "why").ok is False


def test_empty_completion_detail_says_the_sampler_draws_at_least_one_token():
    end = check_completion_end([], EOS, 4)
    assert end.error is EndError.EMPTY
    assert end.detail == "empty completion (the sampler draws at least one token)"


def test_over_budget_detail_gives_the_length_and_the_budget():
    end = check_completion_end([5, 6, 7, 8, 9], EOS, 4)
    assert end.error is EndError.OVER_BUDGET
    assert end.detail == "5 tokens > budget 4"


def test_tokens_after_eos_detail_gives_the_eos_its_position_and_the_tokens_after_it():
    end = check_completion_end([5, 2, 6, 7], EOS, 8)
    assert end.error is EndError.TOKENS_AFTER_EOS
    assert end.detail == "end-of-sequence token 2 at position 1, followed by 2 more tokens"
    # the first EOS is the one reported
    end = check_completion_end([2, 5, 2, 6, 7], {2}, 8)
    assert end.detail == "end-of-sequence token 2 at position 0, followed by 4 more tokens"


def test_eos_second_to_last_followed_by_one_token_is_tokens_after_eos_even_at_the_budget():
    # the scan covers every token but the last: an EOS at n-2 followed by one token, the budget used up exactly
    end = check_completion_end([5, 2, 6], EOS, 3)
    assert end.error is EndError.TOKENS_AFTER_EOS
    assert end.detail == "end-of-sequence token 2 at position 1, followed by 1 more tokens"
    # with budget to spare it is still the EOS, not the cut, that is reported
    assert check_completion_end([5, 2, 6], EOS, 8).error is EndError.TOKENS_AFTER_EOS


def test_cut_short_detail_gives_the_length_and_the_budget():
    end = check_completion_end([5, 6, 7], EOS, 8)
    assert end.error is EndError.CUT_SHORT
    assert end.detail == "3 tokens without an end-of-sequence token, budget 8: cut before the sampler's end"


def test_budget_used_up_exactly_without_eos_is_accepted_and_one_short_is_cut():
    assert check_completion_end([5, 6, 7, 8], EOS, 4).ok is True
    assert check_completion_end([5, 6, 7], EOS, 4).error is EndError.CUT_SHORT
    assert check_completion_end([2], EOS, 1).ok is True  # a lone EOS at the budget
