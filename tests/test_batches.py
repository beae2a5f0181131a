"""The engine's batches: length-sorted rows cut where padding plus each forward's fixed cost is least."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bertscope.core.segments import CALL_COST, Segment, batches


def rows(lengths: list[int]) -> list[Segment]:
    return [Segment(i, [1] * n, [0] * n, [False] * n) for i, n in enumerate(lengths)]


def cost(plan: list[list[Segment]], call: float) -> float:
    return sum(call + len(b) * len(b[0].ids) for b in plan)


def least_cost(lengths: list[int], budget: int, max_batch: int, min_rows: int, call: float) -> float:
    """Every way to cut the sorted rows, by plain recursion (small inputs only)."""
    ordered = sorted(lengths, reverse=True)
    memo: dict[int, float] = {}

    def from_row(i: int) -> float:
        if i == len(ordered):
            return 0.0
        if i not in memo:
            options = []
            for j in range(i + 1, len(ordered) + 1):
                n, width = j - i, ordered[i]
                if n > 1 and (n > max_batch or n * width > max(budget, min_rows * width)):
                    break
                options.append(call + n * width + from_row(j))
            memo[i] = min(options)
        return memo[i]

    return from_row(0)


@pytest.mark.parametrize("seed", range(16))
def test_the_cuts_are_the_cheapest_within_the_limits(seed: int) -> None:
    rng = random.Random(seed)
    short = (1, 4) if seed % 4 == 0 else (3, 40)  # some plans of one- to four-token rows
    lengths = [rng.choice([rng.randint(*short), rng.randint(40, 300)]) for _ in range(rng.randint(1, 60))]
    budget, max_batch = rng.choice([64, 256, 1024]), rng.choice([1, 4, 16, 512])
    min_rows = rng.choice([1, 4, 64])  # 64: more rows of any width than the budget holds
    call = rng.choice([None, 0.0, 8.0, 500.0])  # None: CALL_COST x the budget
    plan = list(batches(rows(lengths), budget, max_batch, min_rows, call))
    flat = [s for b in plan for s in b]
    assert sorted(s.text_index for s in flat) == list(range(len(lengths)))  # each row once
    assert [len(s.ids) for s in flat] == sorted(lengths, reverse=True)  # longest first
    for b in plan:
        width = len(b[0].ids)
        assert len(b) == 1 or (len(b) <= max_batch and len(b) * width <= max(budget, min_rows * width))
    fixed = CALL_COST * budget if call is None else call
    assert cost(plan, fixed) == pytest.approx(least_cost(lengths, budget, max_batch, min_rows, fixed))


def test_it_pads_less_than_filling_each_batch_to_the_budget() -> None:
    rng = random.Random(0)
    lengths = [max(3, int(rng.lognormvariate(3.3, 0.4))) for _ in range(300)]  # sentence-like
    plan = list(batches(rows(lengths), 1024, 512))
    padded = sum(len(b) * len(b[0].ids) for b in plan)
    filled, batch = 0, []  # greedy: each batch as full as the budget lets it be
    for n in sorted(lengths, reverse=True):
        if batch and (len(batch) + 1) * batch[0] > 1024:
            filled += len(batch) * batch[0]
            batch = []
        batch.append(n)
    filled += len(batch) * batch[0]
    assert padded < filled
    assert padded - sum(lengths) < 0.6 * (filled - sum(lengths)), (padded, filled, sum(lengths))


def test_a_long_outlier_runs_alone_and_a_few_short_texts_run_together() -> None:
    plan = list(batches(rows([8, 9, 7, 500, 8, 10]), 1024, 512))
    assert [len(b) for b in plan] == [1, 5] and len(plan[0][0].ids) == 500
    assert list(batches([], 1024, 512)) == []


def test_a_budget_the_user_raises_keeps_the_device_s_fixed_cost_per_forward() -> None:
    """The engine's fixed cost per forward comes from its device's default budget: a user's larger
    budget allows bigger forwards without making each one look dearer (and so padding more)."""
    import bertscope
    from bertscope.core import encoder

    default = bertscope.load(device="cpu", backend="torch")
    assert default.engine.token_budget == encoder.cpu_token_budget(encoder.cpu_threads())
    raised = bertscope.load(device="cpu", backend="torch", token_budget=16 * default.engine.token_budget)
    assert raised.engine.token_budget == 16 * default.engine.token_budget
    assert raised.engine.call_tokens == default.engine.call_tokens == CALL_COST * encoder.CPU_TOKEN_BUDGET


def test_the_cpu_budget_grows_with_the_threads_that_share_each_forward(
    tiny_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """512 tokens a thread, 1,024 at least (2 threads: cache-sized batches) and 8,192 at most (a 16-core
    Xeon ran no faster at 16,384); the machine's own thread count is never read here."""
    import bertscope
    from bertscope.core import encoder

    assert [encoder.cpu_token_budget(t) for t in (1, 2, 3, 8, 16, 64)] == [1024, 1024, 1536, 4096, 8192, 8192]
    monkeypatch.setattr(encoder, "cpu_threads", lambda: 16)
    many = bertscope.load(tiny_dirs["bert"], device="cpu", backend="torch")
    # the fixed cost of a forward stays the one measured at 1,024: the sweeps changed the budget alone
    assert many.engine.token_budget == 8192 and many.engine.call_tokens == CALL_COST * 1024
    monkeypatch.setattr(encoder, "cpu_threads", lambda: 2)
    assert bertscope.load(tiny_dirs["bert"], device="cpu", backend="torch").engine.token_budget == 1024
