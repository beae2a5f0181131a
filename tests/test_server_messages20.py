"""The service's budget refusals read as sentences with their numbers grouped as the 413s group them
(session 20): an answer held too long said "the service holds 36682752 bytes of answers waiting for their
clients in flight, and this answer's 36682752 more would pass 67108864"."""

from __future__ import annotations

import pytest

from bertscope.server import bodies


def test_the_answer_budgets_refusal_is_one_sentence_with_grouped_numbers() -> None:
    budget = bodies.BodyBudget(67_108_864, what="answers waiting for their clients", one="answer")
    budget.take(36_682_752)
    with pytest.raises(bodies.BodyRefused) as refused:
        budget.take(36_682_752)
    assert str(refused.value).startswith(
        "the service holds 36,682,752 bytes of answers waiting for their clients, and this answer's "
        "36,682,752 more would pass 67,108,864 (--max-buffered-bytes)"
    )


def test_the_request_body_budget_still_says_in_flight() -> None:
    budget = bodies.BodyBudget(4000)
    budget.take(3000)
    with pytest.raises(bodies.BodyRefused) as refused:
        budget.take(2000)
    assert "holds 3,000 bytes of request bodies in flight, and this body's 2,000 more" in str(refused.value)
