"""``profplug.current_policy()``, the switch ``profplug ab --switch-every`` flips at step
boundaries, and the per-policy reach counters (no torch needed)."""

from __future__ import annotations

import pytest

import profplug
from profplug import policy
from profplug.session import switcher


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.delenv("PROFPLUG_SYNC", raising=False)
    policy.reset()
    yield
    policy.reset()


def test_current_policy_is_the_environment_s_and_each_call_counts(monkeypatch) -> None:
    monkeypatch.setenv("PROFPLUG_SYNC", "event")
    assert profplug.current_policy() == "event" and profplug.current_policy() == "event"
    assert policy.counts()["event"] == {"p2p_calls": 0, "device_syncs": 0, "event_waits": 0,
                                        "current_policy_calls": 2}
    assert policy.counts()["device"]["current_policy_calls"] == 0
    policy.set_policy("none")
    assert policy.get() == "none" and policy.counts()["none"]["current_policy_calls"] == 0


def test_keep_or_unset_means_device() -> None:
    assert profplug.current_policy() == "device"


def test_the_switcher_flips_at_block_boundaries_and_logs_each_switch() -> None:
    sw = switcher.from_env({"PROFPLUG_SWITCH_EVERY": "3",
                            "PROFPLUG_SWITCH_ORDER": "event,device"})
    assert sw is not None and (sw.every, sw.order) == (3, ["event", "device"])
    seen = []
    for i in range(8):
        sw.on_step_begin(i)
        seen.append(profplug.current_policy())
    assert seen == ["event"] * 3 + ["device"] * 3 + ["event"] * 2
    assert policy.status()["switches"] == [[0, "event"], [3, "device"], [6, "event"]]
    assert policy.counts()["event"]["current_policy_calls"] == 5


def test_an_aa_label_runs_its_policy() -> None:
    sw = switcher.from_env({"PROFPLUG_SWITCH_EVERY": "2",
                            "PROFPLUG_SWITCH_ORDER": "device2,device"})
    assert sw is not None
    sw.on_step_begin(0)
    assert policy.get() == "device" and policy.status()["label"] == "device2"


@pytest.mark.parametrize("env", [
    {"PROFPLUG_SWITCH_EVERY": "x", "PROFPLUG_SWITCH_ORDER": "device,event"},
    {"PROFPLUG_SWITCH_EVERY": "4", "PROFPLUG_SWITCH_ORDER": "device"},
    {"PROFPLUG_SWITCH_EVERY": "4", "PROFPLUG_SWITCH_ORDER": "device,fast"}])
def test_a_malformed_switch_is_an_error(env) -> None:
    with pytest.raises(ValueError):
        switcher.from_env(env)


def test_no_switch_without_the_variable() -> None:
    assert switcher.from_env({}) is None and switcher.from_env(
        {"PROFPLUG_SWITCH_EVERY": "0"}) is None
