"""pyflink_tensair.waiting.wait_until: the one deadline loop."""

import pytest

from pyflink_tensair.waiting import wait_until


def test_returns_the_conditions_value():
    assert wait_until(lambda: "ready", timeout_s=1.0, interval_s=0.01, what="a value") == "ready"


def test_raises_a_timeout_error_naming_what_it_waited_for():
    with pytest.raises(TimeoutError, match=r"^waited 0.03 s for the broker to answer$"):
        wait_until(lambda: None, timeout_s=0.03, interval_s=0.01, what="the broker to answer")


def test_polls_until_the_condition_becomes_true():
    calls = []

    def third_time_lucky():
        calls.append(1)
        return len(calls) if len(calls) >= 3 else 0

    assert wait_until(third_time_lucky, timeout_s=5.0, interval_s=0.01, what="the third call") == 3
    assert len(calls) == 3
