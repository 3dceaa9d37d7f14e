"""The import-time hook of zero-code attach: wrap PySpark's session builders once PySpark is imported.

Runs in every Python process that has ``spark_state_observer/zerocode/boot`` on ``PYTHONPATH`` (Spark's Python
workers too), so it imports nothing but the standard library and costs one dictionary lookup per import:
a meta-path finder waits for ``pyspark.sql.session`` (classic) and ``pyspark.sql.connect.session``
(Spark Connect) and, right after either has run, wraps ``SparkSession.Builder.getOrCreate``/``create``,
``newSession`` and ``stop``. The wrappers hand each session the driver gets to
``spark_state_observer.zerocode.sessions``, which is imported then and only then. ``boot/sitecustomize.py`` may load
this file by path when the package is not importable from the job's Python, to say so when a session is
created (and only then: Spark's Python workers, which create none, stay silent).
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import sys
import threading
import warnings
from types import ModuleType
from typing import Any, Callable, Sequence

# marks our wrappers and our finder, so that two copies of this module (package and by-path) wrap once
MARK = "__spark_state_observer__"
CLASSIC, CONNECT = "pyspark.sql.session", "pyspark.sql.connect.session"

_lock = threading.Lock()
_said: set[str] = set()
_otlp_default = False  # set by the OpenTelemetry instrumentor: export over OTLP unless the OTEL_* variables say no


def say_once(message: str) -> None:
    """One line on stderr per distinct message: why the observer is not attached, never a traceback."""
    line = "spark-state-observer: " + " ".join(message.split())
    with _lock:
        if line in _said:
            return
        _said.add(line)
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except Exception:  # a closed stderr is no reason to fail the job
        pass


# PySpark 4.x warns at every SparkContext start when pandas 3 is installed (``require_minimum_pandas_version``,
# reached through ``pyspark.testing``): it has not finished its pandas-3 support. The observer does not use
# pandas with Spark (only the browser and the MCP server read histories with it), and a warning on every
# start of every job it is attached to taught users to ignore warnings. Only that one message is silenced.
PANDAS_NOTICE = r"PySpark does not yet fully support pandas >= 3"


def quiet_pandas_notice() -> None:
    """Silence PySpark's pandas-3 notice (only it) in this process."""
    warnings.filterwarnings("ignore", message=PANDAS_NOTICE, category=FutureWarning)


def install(otlp_default: bool = False) -> None:
    """Wrap PySpark's builders now if PySpark is imported, else as soon as it is; idempotent."""
    quiet_pandas_notice()
    global _otlp_default
    _otlp_default = _otlp_default or otlp_default
    pending = [name for name in (CLASSIC, CONNECT) if not _patch_if_loaded(name)]
    if pending and not any(getattr(f, MARK, False) for f in sys.meta_path):
        sys.meta_path.insert(0, _PostImportFinder(pending))


def uninstall() -> None:
    """Restore PySpark's methods and remove the finder (sessions already attached stay attached)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, MARK, False)]
    for name in (CLASSIC, CONNECT):
        module = sys.modules.get(name)
        session_class = getattr(module, "SparkSession", None)
        if session_class is None:
            continue
        for owner, attribute in _targets(session_class):
            current = owner.__dict__.get(attribute)
            if getattr(current, MARK, False):
                setattr(owner, attribute, current.__wrapped__)


def _patch_if_loaded(name: str) -> bool:
    module = sys.modules.get(name)
    if module is None or getattr(module, "SparkSession", None) is None:
        return False
    _patch(module)
    return True


def _targets(session_class: Any) -> list[tuple[Any, str]]:
    builder = session_class.__dict__.get("Builder")
    out = [(builder, name) for name in ("getOrCreate", "create") if builder is not None and name in builder.__dict__]
    return out + [(session_class, name) for name in ("newSession", "stop") if name in session_class.__dict__]


def _patch(module: ModuleType) -> None:
    """Wrap the builders and ``newSession`` (a session comes out) and ``stop`` (the observer goes first)."""
    for owner, attribute in _targets(module.SparkSession):
        original = owner.__dict__[attribute]
        if getattr(original, MARK, False):
            continue
        wrapper = _stopping(original) if attribute == "stop" else _creating(original)
        setattr(wrapper, MARK, True)
        setattr(owner, attribute, wrapper)


def _creating(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        session = original(*args, **kwargs)
        _on_session(session)
        return session

    return wrapper


def _stopping(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def wrapper(session: Any, *args: Any, **kwargs: Any) -> Any:
        sessions = sys.modules.get("spark_state_observer.zerocode.sessions")
        if sessions is not None:  # nothing was attached in this process otherwise
            try:
                sessions.detach(session)
            except Exception as exc:  # the job's stop() goes on whatever happens here
                say_once(f"could not detach cleanly: {type(exc).__name__}: {exc}")
        return original(session, *args, **kwargs)

    return wrapper


def _on_session(session: Any) -> None:
    """Attach to ``session``; never raises into the job (``sessions.attach_once`` says why it did not)."""
    try:
        from spark_state_observer.zerocode import sessions
    except Exception as exc:
        say_once(
            f"not attached: the spark-state-observer package cannot be imported by {sys.executable} ({type(exc).__name__}: {exc}); "
            "install it into the Python that runs the job, or add the folder it is installed in to PYTHONPATH"
        )
        return
    try:
        sessions.attach_once(session, otlp_default=_otlp_default)
    except Exception as exc:  # attach_once guards itself; this is the last line of defence
        say_once(f"not attached: {type(exc).__name__}: {exc}")


class _PatchingLoader(importlib.abc.Loader):
    """The real loader of a PySpark session module, then ``_patch`` on the executed module."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: ModuleType) -> None:
        module.__loader__ = self._loader  # the module keeps its real loader (resources, linecache)
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        try:
            _patch(module)
        except Exception as exc:  # a PySpark whose classes look different: the job runs unobserved
            say_once(f"not attached: cannot hook {module.__name__} ({type(exc).__name__}: {exc})")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: for the two session modules it asks the other finders, then wraps the loader."""

    def __init__(self, names: Sequence[str]) -> None:
        self._names = set(names)
        setattr(self, MARK, True)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self._names:
            return None
        for finder in sys.meta_path:
            if getattr(finder, MARK, False) or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _PatchingLoader(spec.loader)
        return spec
