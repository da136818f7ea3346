"""profplug's start-up hook: ``profplug run`` puts this directory first on PYTHONPATH.

Activates profplug (see ``profplug.session.bootstrap``), then runs the ``sitecustomize``
that would have run without profplug (the next one on ``sys.path``), if any.
"""

import importlib.machinery
import importlib.util
import os
import sys


def _chain() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def _record_failure(exc: BaseException) -> None:
    """Leave ``DIR/status/startup-PID.txt`` (the interpreter, then the error) for the
    launcher, which says why nothing was profiled (``profplug.session.outcome``)."""
    out = os.environ.get("PROFPLUG_OUT")  # profplug.config.ENV_OUT (profplug may be missing)
    if not out:
        return
    try:
        status = os.path.join(out, "status")
        os.makedirs(status, exist_ok=True)
        # written directly, not through core.atomicfile: profplug may be what failed to
        # import; the file is this process's own (its pid), no one else writes it
        with open(os.path.join(status, f"startup-{os.getpid()}.txt"), "w") as f:
            f.write(f"{sys.executable}\n{type(exc).__name__}: {exc}\n")
    except Exception:  # never break the user's interpreter
        pass


try:
    from profplug.session.bootstrap import activate

    activate()
except Exception as exc:  # never break the user's interpreter
    sys.stderr.write(f"profplug: start-up failed: {exc!r}\n")
    _record_failure(exc)
finally:
    _chain()
