"""``threadline.errors`` is the one place to import any error threadline can raise from.

Its docstring promises "every error threadline raises, importable from one place": an exception
class defined in some other module and not re-exported would be one users cannot catch without
reaching into internals. So every module of the package is imported and searched.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

from services import in_ci

import threadline
from threadline import errors

# Exceptions that never reach a caller, and so need not be importable from threadline.errors.
INTERNAL = {
    # Signals between a backend's commit and the saver core: the head's compare-and-set
    # failed, or values a delta needs are gone. ``put``/``aput`` always catch them and raise
    # ConcurrentUpdateError or SerializationError (both in threadline.errors) instead.
    "threadline.checkpoint.backend.HeadMoved",
    "threadline.checkpoint.backend.NotStored",
    # The command line's own signal to its entry point, which prints it and exits with its code.
    "threadline.cli.errors.CliError",
    # Between the server's queue and its workers: a thread already has a running run, a run
    # was taken over or cancelled, a job must wait. Clients see HTTP statuses and run statuses.
    "threadline.server.db.UniqueViolation",
    "threadline.server.execute.LeaseLost",
    "threadline.server.execute.Cancelled",
    "threadline.server.jobs.NotYet",
}


def imported(name: str) -> ModuleType | None:
    """The module ``name``; None if it needs an optional driver (psycopg, redis) that is not
    installed, except under ``CI=true``, where every driver must be (as in ``services.py``)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if in_ci() or (exc.name or "").startswith("threadline"):
            raise
        return None


def public_exceptions() -> dict[str, type[BaseException]]:
    """Every public exception class defined in a threadline module, by its qualified name."""
    found: dict[str, type[BaseException]] = {}
    modules = pkgutil.walk_packages(threadline.__path__, threadline.__name__ + ".")
    for name in sorted(m.name for m in modules):
        module = imported(name)
        if module is None:
            continue
        for attr, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == module.__name__
                and not attr.startswith("_")
            ):
                found[f"{module.__name__}.{attr}"] = obj
    return found


def test_every_public_exception_is_importable_from_threadline_errors() -> None:
    missing = [
        name
        for name, cls in public_exceptions().items()
        if name not in INTERNAL and getattr(errors, cls.__name__, None) is not cls
    ]
    assert missing == []


def test_the_internal_allow_list_names_real_classes() -> None:
    """A stale entry would let a future public class of the same name slip through unseen."""
    for name in INTERNAL:
        module_name, _, attr = name.rpartition(".")
        module = imported(module_name)
        if module is not None:
            assert inspect.isclass(getattr(module, attr, None)), name


def test_the_search_finds_the_errors_module_itself() -> None:
    """Guards the search: a walk that imported nothing would pass the test above vacuously."""
    found = public_exceptions()
    assert found["threadline.errors.ThreadlineError"] is errors.ThreadlineError
    assert found["threadline.errors.GraphInterrupt"] is errors.GraphInterrupt  # a BaseException
