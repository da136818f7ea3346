"""On the suite's ``PYTHONPATH`` (tests/conftest.py), so every Python process the tests start
imports it: at exit, ``gc.freeze()`` moves every live object to the collector's permanent
generation, and the interpreter's shutdown collections no longer walk torch's object graph.

A process that imported torch spends more than half of its start-up's CPU time again in
those collections after its last line, and the suite starts ~100 such processes (torchrun
launchers, their ranks, pytest's workers): benchmarks/2026-12-07/README.md, "Suite time,
round 3". Nothing a job or profplug writes depends on it: ``atexit`` handlers (profplug's
status files and traces) and finalizers of objects freed by reference counting still run;
only cyclic garbage left at exit is not collected, which CPython never promises to finalize
at shutdown. ``profplug run`` keeps this module running: it chains the ``sitecustomize`` it
finds on the job's path."""

import atexit
import gc

atexit.register(gc.freeze)
