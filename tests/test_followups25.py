"""Follow-ups of the session's audits (25): small command-line consistencies."""

from __future__ import annotations

from console import run_main


def test_contextuality_top_k_under_one_is_a_range_error_as_every_other_top_k() -> None:
    # exit 2 (docs/errors.md: a value outside its range), before the corpus is read
    ran = run_main("contextuality", "-i", "no-such-file.txt", "-k", "0")
    assert ran.code == 2, (ran.code, ran.stderr)
    assert "--top-k" in ran.stderr and "1" in ran.stderr
