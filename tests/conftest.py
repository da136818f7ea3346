import gc
import importlib.util
import os
import socket
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

# Quickstart installs with `pip install --no-compile`: the suite's ~100 processes (pytest
# workers, torchrun jobs) then compile only the modules they import (~2,800 of the
# environment's ~9,500), once, into __pycache__, where pip would compile all of them up front
# (~45 s of one core, most of it torch modules no test imports). A machine that sets
# PYTHONDONTWRITEBYTECODE would make every one of those processes compile torch again
# (~10 min on 2 cores): the suite writes bytecode whatever that setting, in this process and
# in every process it starts.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# Every Python process the suite starts has its cycle collector skip the objects its imports
# left behind (torch's), at full passes and at exit (tests/lean_gc/sitecustomize.py).
LEAN_GC = Path(__file__).resolve().parent / "lean_gc"
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(LEAN_GC), *filter(None, [os.environ.get("PYTHONPATH")])])

# What the suite's processes import, compiled by two processes before the tests start: else
# the first jobs (a torchrun launcher and its ranks on each pytest worker) would all compile
# torch at once, each for itself.
# The second also compiles sympy and networkx, which torch's compiler stack (Megatron-Core,
# transformers) imports last: the first, the longest, then finds them compiled.
# The second then rewrites the test modules' asserts for every worker
# (tests/asserts_rewritten.py).
_WARM = ("import torch, torch.distributed.run, torch.autograd.profiler; "
         "import megatron.core.inference.model_inference_wrappers.gpt.gpt_inference_wrapper, "
         "megatron.core.pipeline_parallel.p2p_communication",
         "import pandas, numpy, msgspec, hypothesis, distributed, profplug.cli.main, "
         "profplug.analyzers.report.analysis, profplug.analyzers.commands.ab_report, "
         "sympy, networkx; import runpy; "
         f"runpy.run_path({str(Path(__file__).with_name('asserts_rewritten.py'))!r}, "
         "run_name='__main__')")


def pytest_configure(config: pytest.Config) -> None:
    """Compile once (see _WARM) in the main process, when torch has no bytecode yet. Beside
    it, at low priority and not waited for, fill the type check's mypy cache
    (tests/mypy_check.py, under its lock: the test's own run waits for it, then is
    incremental); it takes a core when the compiling leaves one, then the tests' idle time."""
    spec = importlib.util.find_spec("torch")
    if os.environ.get("PYTEST_XDIST_WORKER") or spec is None or spec.origin is None:
        return
    if Path(importlib.util.cache_from_source(spec.origin)).exists():
        return
    procs = [subprocess.Popen([sys.executable, "-W", "ignore", "-c", code],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for code in _WARM]
    cache = getattr(config, "cache", None)
    home = cache.mkdir("mypy") if cache is not None else None
    if home is not None and not (home / "cache").exists():
        subprocess.Popen([sys.executable, str(Path(__file__).with_name("mypy_check.py")),
                          str(home)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         preexec_fn=lambda: os.nice(10))
    for proc in procs:
        proc.wait()  # a failed import fails again, visibly, in the test that needs it


# Outside a test (a module's fixtures), each pytest worker's torchrun jobs rendezvous on a port
# of their own; inside one, on a free port of the test's own (_torchrun_port).
_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _worker.startswith("gw") and "PET_MASTER_PORT" not in os.environ:
    os.environ["PET_MASTER_PORT"] = str(29500 + 11 * (1 + int(_worker[2:] or 0)))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(autouse=True)
def _torchrun_port(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's torchrun jobs rendezvous on a free port of their own (torchrun reads its
    options from PET_* variables): the default 29500 would be shared by pytest's workers, and
    a port kept per worker may still be held by the launcher of the worker's previous job,
    which a stopped job (SIGTERM, SIGINT) can outlive its test by seconds."""
    monkeypatch.setenv("PET_MASTER_PORT", str(_free_port()))


@pytest.fixture(autouse=True)
def _samples_read_once(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a module marked ``samples_read_once``, the commands its tests run (in this process)
    read each shipped sample run once per session (``sample_cache.reading_once``): for modules
    that read the samples through the CLI or the front object, not for tests of the reading
    itself."""
    if request.node.get_closest_marker("samples_read_once") is not None:
        import sample_cache

        sample_cache.reading_once(monkeypatch)


@pytest.fixture(scope="session")
def samples() -> ModuleType:
    """The shipped sample runs, each read and analyzed once per session: ``samples.report(run)``,
    ``samples.stalls(run)``, ``samples.whatif(run)``, ``samples.cross_rank(run)``,
    ``samples.timelines(run)`` (tests/sample_cache.py; modules may import it directly)."""
    import sample_cache

    return sample_cache


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection imported (torch, pandas, every test module) lives to the end: frozen,
    the collector's full passes during the tests no longer walk it. From here on this worker
    collects with the defaults: lean_gc's freezing after each full pass ends (a worker lives
    through every test, and a test's cyclic garbage must not outlive it)."""
    gc.freeze()
    gc.callbacks[:] = [cb for cb in gc.callbacks
                       if getattr(cb, "__name__", "") != "freeze_survivors"]


# Longest first on every worker (tests/scheduling.py): under `pytest -n N --dist worksteal`
# each worker's slice of the collection starts with its share of the costly modules (torchrun
# and ab jobs, Chromium, the page-number checks), so the long jobs run side by side from the
# start and the end of the run is short tests only; one worker: the costly modules first.
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from scheduling import module_costs, modules_together, worker_order

    workers = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    items[:] = worker_order(items, workers, lambda it: it.nodeid.split("::", 1)[0],
                            module_costs(), modules_together())
