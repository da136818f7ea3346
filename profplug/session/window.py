"""A rank's window: which steps it covers and which are timed (:class:`WindowPlan`, fixed by
the config), the window being recorded (:class:`Window`), and the step clocks
(:class:`StepClocks`): the window's own and, in a traced run, the untraced steps around it
(observer effect, see :mod:`profplug.session.core`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from profplug.analyzers.core.vocabulary import StepTiming, WindowMode
from profplug.config import Config
from profplug.session.steptimer import StepTimer

SETTLE_STEPS = 1  # after the window, untimed: it waits for the peers' trace writes


@dataclass(frozen=True)
class WindowPlan:
    """What was asked of the window: steps ``[skip, skip + steps)`` and their clocks."""

    skip: int
    steps: int
    clock: StepTiming  # the window's step timer
    observe: bool  # a profiler records: the untraced steps around the window are timed

    @classmethod
    def of(cls, config: Config, traced: bool) -> WindowPlan:
        """A traced run times its window (``events``) even with step timing off: the same
        clock as the untraced steps."""
        clock = config.step_timing
        if clock == StepTiming.OFF and traced:
            clock = StepTiming.EVENTS
        return cls(config.skip, config.steps, clock, traced)

    @property
    def warmup_steps(self) -> int:
        """Steps before the untraced ones: ``[0, skip // 2)``."""
        return self.skip // 2

    @property
    def untraced_before(self) -> int:
        """Untraced steps timed before the window (step ``skip - 1`` prepares the profiler)."""
        return self.skip - 1 - self.warmup_steps

    @property
    def untraced_after_from(self) -> int:
        """The first untraced step after the window and its settle step."""
        return self.skip + self.steps + SETTLE_STEPS


@dataclass
class Window:
    """The window being recorded, or the last one; a fresh one replaces a window given up."""

    mode: WindowMode | None = None  # run: from the first p2p/synchronize call
    first_step: int | None = None  # set when the window opens
    steps: int = 0  # steps recorded
    saved: bool = False  # its trace file is written


class StepClocks:
    """The window's step timer and the untraced ones around it, and their results."""

    def __init__(self, plan: WindowPlan) -> None:
        self.plan = plan
        self.window: StepTimer | None = None  # open while a timed window runs
        self.timing: dict[str, Any] | None = None  # the last timed window's result
        self.untraced: dict[str, Any] = {"before": None, "after": None,
                                         "warmup_steps": plan.warmup_steps}
        self._untraced: dict[str, StepTimer] = {}  # "before" / "after" while they run

    def step_begins(self, index: int, window_opened: bool) -> None:
        """Untraced step timers: created on their first step, marked at each step begin."""
        plan = self.plan
        if not plan.observe:
            return
        if (index == plan.warmup_steps and plan.untraced_before >= 1
                and self.untraced["before"] is None):
            self._untraced["before"] = StepTimer(plan.untraced_before, StepTiming.EVENTS)
        if (index == plan.untraced_after_from and self.untraced["after"] is None
                and window_opened):
            self._untraced["after"] = StepTimer(plan.steps, StepTiming.EVENTS)
        for key, timer in list(self._untraced.items()):
            timer.mark()
            if timer.complete:  # "before": at the begin of step skip - 1
                self._close_untraced(key)

    def step_ends(self) -> None:
        """The untraced steps after the window end with the end of their last step."""
        after = self._untraced.get("after")
        if after is not None and after.marks == after.n:
            after.mark()
            self._close_untraced("after")

    def open_window(self) -> None:
        """The window's timer (its CUDA events made now, before the ranks meet)."""
        if self.plan.clock != StepTiming.OFF:
            self.window = StepTimer(self.plan.steps, self.plan.clock)

    def mark(self) -> None:
        """A window step boundary (every step begin, and the end of the last step)."""
        if self.window is not None:
            self.window.mark()

    def close_window(self, cuda_calls: bool = True) -> None:
        if self.window is not None:
            self.timing = self.window.result(cuda_calls)
            self.window = None

    def close(self, cuda_calls: bool = True) -> None:
        """At exit: every timer still open, cut short."""
        self.close_window(cuda_calls)
        for key in list(self._untraced):
            self._close_untraced(key, cuda_calls)

    def reset(self) -> None:
        """A window given up: its times and the untraced ones around it go with it."""
        self.window, self.timing = None, None
        self._untraced.clear()
        self.untraced.update(before=None, after=None)

    def _close_untraced(self, key: str, cuda_calls: bool = True) -> None:
        timer = self._untraced.pop(key, None)
        if timer is not None and timer.marks > 1:
            self.untraced[key] = timer.result(cuda_calls)
