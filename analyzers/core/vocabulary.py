"""The closed sets of words profplug's options, files and outputs use, one ``Word`` enum each
(stdlib only: the runtime plugin imports it inside every rank).

A member *is* its word: ``SyncPolicy.DEVICE == "device"``, it hashes as ``"device"``, and it
prints, formats (f-strings; ``repr`` quotes it: ``'device'``) and serialises (``json``,
``msgspec``, ``csv``) as ``device``, so JSON, CSV and text keep their bytes while code
compares types. A plain ``(str, Enum)`` formats as ``SyncPolicy.DEVICE`` from Python 3.11
on; :class:`Word` does not, on 3.10 too.

A word from outside (an option, an environment variable, a JSON file) becomes a member once,
where it comes in (:meth:`Word.parse`: a one-line error naming the choices).
"""

from __future__ import annotations

from enum import Enum
from typing import TypeVar

W = TypeVar("W", bound="Word")


class Word(str, Enum):
    """A member of a closed set of words: a str equal to its word, shown as the word alone."""

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, spec: str) -> str:
        return str.__format__(str.__str__(self), spec)

    def __repr__(self) -> str:  # a message's {x!r} quotes the word, as it did a str
        return str.__repr__(self)

    @classmethod
    def choices(cls) -> str:
        """The words, as an error message lists them: ``"device, event, none"``."""
        return ", ".join(m.value for m in cls)

    @classmethod
    def parse(cls: type[W], text: str, what: str, error: type[Exception] = ValueError) -> W:
        """The member whose word is ``text``, or ``error``: ``{what} must be one of ...``."""
        try:
            return cls(text)
        except ValueError:
            raise error(f"{what} must be one of {cls.choices()}, got {text!r}") from None


class SyncPolicy(Word):
    """What a pipeline does after a communication's wait (``profplug.syncpoint``): a
    device-wide synchronize (Megatron's), an event wait on the current stream, or nothing."""

    DEVICE = "device"
    EVENT = "event"
    NONE = "none"


class SyncKind(Word):
    """How widely a host call that waits for the GPU blocks (``core.classify``): the whole
    device, one stream or event, or a stream waiting on an event (the host does not block)."""

    DEVICE = "device"
    EVENT = "event"
    STREAM_WAIT = "stream_wait"


class TraceKind(Word):
    """How ``profplug run``'s ranks record (``--trace``, ``PROFPLUG_TRACE``); a Timeline's
    ``source`` is one of the first two."""

    KINETO = "kineto"
    NSYS = "nsys"
    NONE = "none"


class WindowMode(Word):
    """What a rank's recorded window covers (its trace's ``profplugWindow.mode``): steps, or
    the whole run from the first p2p/synchronize call when no step came."""

    STEPS = "steps"
    RUN = "run"


class StepTiming(Word):
    """How a rank times its window's steps (``PROFPLUG_STEP_TIMING``): not at all, the host's
    perf counter only, or a CUDA event per step boundary too."""

    OFF = "off"
    HOST = "host"
    EVENTS = "events"


class Basis(Word):
    """What a rank's step figure is taken over: its steps, or its GPU window (no steps)."""

    STEP = "step"
    WINDOW = "window"


class Format(Word):
    """An output format (``--format``; the page is ``--html``)."""

    TABLE = "table"
    JSON = "json"
    CSV = "csv"
    HTML = "html"
