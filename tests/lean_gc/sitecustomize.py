"""On the suite's ``PYTHONPATH`` (tests/conftest.py), so every Python process the tests start
imports it first. Two changes to the cycle collector, both about the objects that imports
leave behind (torch's, Megatron-Core's, transformers'):

- after each full collection, what survived it is frozen (``gc.freeze()``: moved to the
  permanent generation), so the next full collections walk only what is newer. An import of
  torch, Megatron-Core or transformers otherwise walks its growing graph of modules,
  classes and functions again at every full pass;
- at exit, ``gc.freeze()``: the interpreter's shutdown collections skip all of it.

The suite starts ~100 processes that import torch (torchrun launchers, their ranks, pytest's
workers): benchmarks/2026-12-07/README.md, "Suite time". Nothing a job or profplug writes
depends on it: objects freed by reference counting are freed as before, ``atexit`` handlers
(profplug's status files and traces) run; only cyclic garbage that was alive at a full
collection is left for the process's end, which in these seconds-long processes is memory,
never output. The pytest processes drop the first change once their collection is done
(``pytest_collection_finish`` in tests/conftest.py): the tests run under the collector's
defaults. ``profplug run`` keeps this module running: it chains the ``sitecustomize`` it
finds on the job's path."""

import atexit
import gc


def freeze_survivors(phase: str, info: dict) -> None:
    """A ``gc.callbacks`` entry: at the end of a full collection, freeze what survived it."""
    if phase == "stop" and info["generation"] == 2:
        gc.freeze()


gc.callbacks.append(freeze_survivors)
atexit.register(gc.freeze)
