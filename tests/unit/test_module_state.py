"""No module-level mutable state in analyzers/ and profplug/: every module's top level (and
every class body's shared attributes) is read for mutable containers (list, dict and set
displays or calls, defaultdict, deque, a Memo...), for a module-level call that mutates one
(``X.update(...)``), for ``global`` statements, for function caches (``@cache``,
``@lru_cache``) and for an attribute of a project module set from outside it (a module
function rebound at run time). A constant is made immutable (a tuple, a frozenset, a MappingProxyType), so
it is not found. What is found must be in an allow-list below, each entry with its reason,
and an entry that no longer matches anything fails too (the lists stay true)."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import MappingProxyType

from parsed_source import parsed

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("analyzers", "profplug")

MUTABLE_CALLS = frozenset({
    "list", "dict", "set", "bytearray", "defaultdict", "OrderedDict", "Counter", "deque",
    "ChainMap", "WeakValueDictionary", "WeakKeyDictionary", "WeakSet", "Memo", "ScopedMemo",
    "sorted", "split",  # each makes a new list
})
MUTATING_METHODS = frozenset({
    "append", "extend", "insert", "add", "update", "setdefault", "pop", "popitem", "remove",
    "discard", "clear",
})
CACHE_DECORATORS = frozenset({"cache", "lru_cache", "cached_property"})

# The runtime plugin runs inside each rank's process: this is the state a rank needs (the
# developers' guide: "no global state in the plugin beyond what a rank needs"), one per
# process, never read by the analyzer. (module, name): why.
RANK_STATE: Mapping[tuple[str, str], str] = MappingProxyType({
    ("profplug/annotation.py", "_cache"): "the rank's prebuilt NVTX ranges, by name",
    ("profplug/annotation.py", "_classes"): "the range classes to switch when torch.profiler "
                                            "starts or stops",
    ("profplug/annotation.py", "_profiling"): "whether torch.profiler records in this process",
    ("profplug/annotation.py", "_hooked"): "whether the profiler's start/stop is hooked",
    ("profplug/autosteps.py", "_targets"): "the step functions declared in this process",
    ("profplug/autosteps.py", "_replaced"): "what this process patched, to unpatch it",
    ("profplug/autosteps.py", "_libraries"): "the libraries whose steps this process patched",
    ("profplug/autosteps.py", "_active"): "the step function running now in this process",
    ("profplug/digests.py", "_state"): "this rank's output digests",
    ("profplug/hooks.py", "_callbacks"): "import hooks waiting for their module",
    ("profplug/hooks.py", "_executed"): "the modules whose hooks already ran",
    ("profplug/libraries.py", "_named"): "the library functions wrapped in this process",
    ("profplug/p2p.py", "_outer"): "the rank's prebuilt p2p ranges, by call",
    ("profplug/p2p.py", "_group_ranks"): "process group -> its global ranks, asked once",
    ("profplug/policy.py", "COUNTS"): "this rank's calls per sync policy and kind",
    ("profplug/policy.py", "_switches"): "the rank's policy switches (profplug ab)",
    ("profplug/policy.py", "_current"): "the rank's sync policy now",
    ("profplug/policy.py", "_label"): "the rank's policy label now",
    ("profplug/scriptsteps.py", "_pending"): "step functions of the job's script, to patch",
    ("profplug/scriptsteps.py", "_state"): "the job's script, once found",
    ("profplug/session/exitcode.py", "_installed"): "the exit hooks this process installed",
    ("profplug/sites.py", "_states"): "the sync sites declared in this process",
    ("profplug/sites.py", "_replaced"): "what this process wrapped, to unwrap it",
    ("profplug/steps.py", "_attached"): "torch.profiler sessions the job attached",
    ("profplug/steps.py", "_count"): "the rank's step count",
    ("profplug/steps.py", "_open"): "the rank's open step",
    ("profplug/steps.py", "_level"): "the step source in control",
    ("profplug/steps.py", "_library"): "the library whose steps count",
    ("profplug/steps.py", "_on_begin"): "the rank's step listeners (tuples, replaced whole)",
    ("profplug/steps.py", "_on_end"): "the rank's step listeners (tuples, replaced whole)",
    ("profplug/steps.py", "_on_switch"): "the rank's step listeners (tuples, replaced whole)",
    ("profplug/steps.py", "_on_activity"): "the rank's activity listeners (tuples)",
    ("profplug/syncpoint.py", "_pending"): "the rank's event waits still to complete",
    ("profplug/syncpoint.py", "_free_events"): "CUDA events the rank reuses",
    ("profplug/syncpoint.py", "_replaced"): "what this process patched, to unpatch it",
    ("profplug/syncpoint.py", "_original"): "torch.cuda.synchronize before the patch",
    ("profplug/syncpoint.py", "_accel_original"): "torch.accelerator.synchronize before it",
    ("profplug/syncpoint.py", "_call_site_ranges"): "whether call-site ranges are on",
    ("profplug/syncpoint.py", "_sites_use"): "whether sync sites are declared",
})

# Caches of functions whose answer depends only on their (hashable, small) arguments, or on
# nothing: the same answer for every caller and thread, whatever ran before. (module,
# function): why.
PURE_CACHES: Mapping[tuple[str, str], str] = MappingProxyType({
    ("analyzers/core/classify.py", "base_name"): "a CUDA API name without its suffixes",
    ("analyzers/core/memtrim.py", "_malloc_trim"): "libc's malloc_trim, looked up once",
    ("analyzers/core/ranges.py", "without_payload"): "a range name without its payload",
    ("analyzers/graph/dropset.py", "_pipeline_name"): "whether a range name is a send/recv",
    ("analyzers/graph/model.py", "_empty"): "a read-only empty array per dtype",
    ("analyzers/readers/cache.py", "reader_fingerprint"): "the readers' source, hashed once",
    ("analyzers/scale/placement.py", "_note_former_name"): "a deprecation note, said once",
    ("analyzers/scale/result_cache.py", "analyzer_fingerprint"): "the source, hashed once",
    ("analyzers/scale/result_cache.py", "_result_types"): "result classes by key",
    ("analyzers/scale/result_cache.py", "_stalls_decoder"): "one msgspec decoder",
})

# Resources this process opened, so that they are closed at exit: they hold no result.
PROCESS_RESOURCES: Mapping[tuple[str, str], str] = MappingProxyType({
    ("analyzers/scale/dask_backend.py", "_open"): "the Dask clusters this process started, "
                                                  "closed at exit if the caller did not",
})


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), parsed(path)


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call):
        return _name(node.func)
    return ""


def _mutable(value: ast.expr | None) -> bool:
    return isinstance(value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp,
                              ast.SetComp)) or (isinstance(value, ast.Call)
                                                and _name(value.func) in MUTABLE_CALLS)


def _top(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements run at import: the body, and inside its if/try/with blocks."""
    for node in body:
        yield node
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            for block in (getattr(node, "body", []), getattr(node, "orelse", []),
                          getattr(node, "finalbody", []),
                          *(h.body for h in getattr(node, "handlers", []))):
                yield from _top(block)


def _targets(node: ast.Assign | ast.AnnAssign) -> list[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return [t.id for t in targets if isinstance(t, ast.Name)]


def _shared(cls: ast.ClassDef) -> Iterator[tuple[str, ast.expr | None]]:
    """A class body's attributes shared by every instance: plain assignments and ClassVars
    (an annotated field's default is each instance's own: dataclass, msgspec)."""
    for node in cls.body:
        if isinstance(node, ast.Assign):
            for name in _targets(node):
                yield name, node.value
        elif isinstance(node, ast.AnnAssign) and "ClassVar" in ast.unparse(node.annotation):
            yield from ((name, node.value) for name in _targets(node))


def found_state(module: str, tree: ast.Module) -> list[tuple[str, str, str]]:
    """(module, name, what) for each piece of module-level mutable state in ``tree``."""
    out: list[tuple[str, str, str]] = []
    for node in _top(tree.body):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and _mutable(node.value):
            # __all__ is read by ``import *`` and by tools, never changed: not state
            out += [(module, n, "mutable container") for n in _targets(node) if n != "__all__"]
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            out.append((module, node.target.id, "changed at import"))
        elif (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
              and isinstance(node.value.func, ast.Attribute)
              and node.value.func.attr in MUTATING_METHODS):
            out.append((module, _name(node.value.func.value), "changed at import"))
        elif isinstance(node, ast.ClassDef):
            out += [(module, f"{node.name}.{n}", "mutable class attribute")
                    for n, v in _shared(node) if _mutable(v)]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                _name(d) in CACHE_DECORATORS for d in node.decorator_list):
            out.append((module, node.name, "function cache"))
    for any_node in ast.walk(tree):
        if isinstance(any_node, ast.Global):
            out += [(module, n, "global statement") for n in any_node.names]
    return out


def rebound(module: str, tree: ast.Module) -> list[tuple[str, str]]:
    """(module, ``name.attr``) for each assignment to an attribute of a project module or
    name this module imported (``_steps.on_activity = _noop``): a function or value swapped
    at run time, what every other importer then sees. A listener is registered instead."""
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.asname or a.name.split(".")[0] for a in node.names
                         if a.name.split(".")[0] in ("profplug", *PACKAGES)}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in (
                "profplug", *PACKAGES):
            imported |= {a.asname or a.name for a in node.names}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                        and t.value.id in imported):
                    out.append((module, f"{t.value.id}.{t.attr}"))
    return out


def _all_found() -> list[tuple[str, str, str]]:
    return [f for module, tree in _modules() for f in found_state(module, tree)]


ALLOWED = {**RANK_STATE, **PURE_CACHES, **PROCESS_RESOURCES}


def test_no_module_level_mutable_state_beyond_the_allow_lists() -> None:
    unexplained = sorted({f for f in _all_found() if (f[0], f[1]) not in ALLOWED})
    assert unexplained == []


def test_every_allow_list_entry_still_names_state_that_exists() -> None:
    found = {(m, n) for m, n, _ in _all_found()}
    assert sorted(k for k in ALLOWED if k not in found) == []


def test_every_allow_list_entry_says_why() -> None:
    assert all(len(why.split()) >= 3 for why in ALLOWED.values())


def test_no_module_of_the_project_has_an_attribute_rebound() -> None:
    assert [r for module, tree in _modules() for r in rebound(module, tree)] == []


def test_a_rebound_module_function_is_found() -> None:
    planted = ast.parse(
        "import profplug.steps as _steps\n"
        "from profplug import policy\n"
        "import torch\n"
        "def start(rank_owner):\n"
        "    import profplug.steps as steps\n"
        "    steps.on_activity = rank_owner.on_activity\n"
        "    _steps.on_activity = None\n"
        "    policy.COUNTS += 1\n"
        "    torch.cuda.synchronize = None\n"
        "    rank_owner.mode = 'run'\n")
    assert rebound("m.py", planted) == [("m.py", "steps.on_activity"),
                                        ("m.py", "_steps.on_activity"),
                                        ("m.py", "policy.COUNTS")]


def test_the_check_finds_each_kind_of_planted_state() -> None:
    planted = ast.parse(
        "import functools\n"
        "from collections import defaultdict\n"
        "__all__ = ['kept']\n"
        "TABLE = {'a': 1}\n"
        "SEEN: list[int] = []\n"
        "BY = defaultdict(list)\n"
        "FROZEN = frozenset({'a'})\n"
        "NAMES = ('a', 'b')\n"
        "if True:\n"
        "    LATE = set()\n"
        "TABLE.update(b=2)\n"
        "class C:\n"
        "    shared = []\n"
        "    own: list[int] = []\n"
        "@functools.lru_cache(maxsize=8)\n"
        "def f(x): return x\n"
        "def g():\n"
        "    global COUNT\n"
        "    local = []\n")
    assert sorted((n, what) for _, n, what in found_state("m.py", planted)) == [
        ("BY", "mutable container"), ("C.shared", "mutable class attribute"),
        ("COUNT", "global statement"), ("LATE", "mutable container"),
        ("SEEN", "mutable container"), ("TABLE", "changed at import"),
        ("TABLE", "mutable container"), ("f", "function cache")]
