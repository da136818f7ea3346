"""An A/B's plan: the order of its runs (interleaved, random from a seed, counterbalanced: a
Latin square whose positions are recorded; a switched run's block orders) and its policies
(device and another; an A/A check's second label of the same policy)."""

from __future__ import annotations

import pytest
from profplug.analyzers.ab import parse_policies, schedule
from profplug.analyzers.ab.plan import policy_of, positions, switched_orders
from synth import AB_POLICIES as POLICIES

LABELS = ["device", "event"]


def test_interleaved_order_runs_every_policy_once_per_round_in_the_given_order() -> None:
    assert schedule(["device", "event"], 3, "interleaved") == [
        (0, "device"), (0, "event"), (1, "device"), (1, "event"), (2, "device"), (2, "event")]


def test_random_order_is_shuffled_per_round_and_reproducible_from_its_seed() -> None:
    plan = schedule(POLICIES, 20, "random", seed=5)
    assert plan == schedule(POLICIES, 20, "random", seed=5)
    assert [r for r, _ in plan] == [r for r in range(20) for _ in POLICIES]
    rounds = [tuple(p for r, p in plan if r == k) for k in range(20)]
    assert all(sorted(x) == sorted(POLICIES) for x in rounds)
    assert len(set(rounds)) > 1  # not always the same order
    with pytest.raises(ValueError):
        schedule(POLICIES, 2, "alphabetical")


@pytest.mark.parametrize("text, error", [
    ("event,none", "baseline"), ("device", "baseline"), ("device,fast", "unknown policy"),
    ("device,event,event", "twice")])
def test_policies_must_name_device_and_another(text, error) -> None:
    with pytest.raises(ValueError, match=error):
        parse_policies(text, ("device", "event", "none"))
    assert parse_policies(" Device, event ", ("device", "event", "none")) == ["device", "event"]


def test_counterbalanced_order_puts_every_policy_in_every_position_equally_often() -> None:
    assert schedule(LABELS, 4) == [(0, "device"), (0, "event"), (1, "event"), (1, "device"),
                                   (2, "device"), (2, "event"), (3, "event"), (3, "device")]
    three = schedule(["device", "event", "none"], 3)
    rounds = [[p for r, p in three if r == k] for k in range(3)]
    assert rounds == [["device", "event", "none"], ["event", "none", "device"],
                      ["none", "device", "event"]]  # a Latin square
    assert positions(three) == [0, 1, 2] * 3
    assert switched_orders(LABELS, 3) == [LABELS, ["event", "device"], LABELS]


def test_an_aa_check_names_the_same_policy_under_two_labels() -> None:
    assert parse_policies("device,device", ("device", "event", "none")) == ["device",
                                                                             "device2"]
    assert policy_of("device2") == "device" and policy_of("event") == "event"
    with pytest.raises(ValueError, match="twice"):
        parse_policies("event,event", ("device", "event", "none"))
