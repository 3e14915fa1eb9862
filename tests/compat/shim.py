"""Run a LangGraph program under threadline by renaming its imports, nothing else.

``python tests/compat/shim.py program.py`` installs an import hook and runs the program as
``__main__``. The hook answers every ``langgraph`` / ``langgraph.X`` import with a module that
forwards attribute access to ``threadline`` / ``threadline.X`` (or to the modules named in
``EXCEPTIONS``, searched in order, where the two libraries put a name in different places). It
never patches behaviour: a program that needs something threadline lacks fails as it would for a
user.

Forwarding modules (rather than registering threadline's own module objects under the langgraph
names) keep threadline's namespace untouched when ``langgraph.config`` is served by ``threadline``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import runpy
import sys
from types import ModuleType
from typing import Any

SOURCE = "langgraph"
TARGET = "threadline"

# LangGraph modules whose names threadline keeps somewhere else (searched in order); every
# other ``langgraph.X`` maps to ``threadline.X``. Empty: threadline mirrors every path the
# corpus imports.
EXCEPTIONS: dict[str, tuple[str, ...]] = {}


def target_names(fullname: str) -> tuple[str, ...]:
    """The threadline modules that serve the LangGraph module ``fullname``, first match wins."""
    if fullname in EXCEPTIONS:
        return EXCEPTIONS[fullname]
    return (TARGET + fullname[len(SOURCE) :],)


class _ForwardingModule(ModuleType):
    """A ``langgraph.*`` module whose attributes are those of threadline modules."""

    def __init__(self, name: str, targets: list[ModuleType]) -> None:
        super().__init__(name, targets[0].__doc__)
        self.__dict__["_targets"] = targets
        exported = [n for t in targets for n in getattr(t, "__all__", ())]
        if exported:
            self.__dict__["__all__"] = list(dict.fromkeys(exported))

    def __getattr__(self, attr: str) -> Any:
        for target in self.__dict__["_targets"]:
            if hasattr(target, attr):
                return getattr(target, attr)
        raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}")

    def __dir__(self) -> list[str]:
        names = set(self.__dict__)
        for target in self.__dict__["_targets"]:
            names |= set(dir(target))
        return sorted(names)


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, targets: list[ModuleType]) -> None:
        self._targets = targets

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return _ForwardingModule(spec.name, self._targets)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module forwards to one already imported."""


class LangGraphAliasFinder(importlib.abc.MetaPathFinder):
    """Finds ``langgraph`` and its submodules by importing their threadline counterparts."""

    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != SOURCE and not fullname.startswith(SOURCE + "."):
            return None
        names = target_names(fullname)
        modules = [m for m in map(_import_if_present, names) if m is not None]
        if not modules:
            raise ModuleNotFoundError(
                f"No module named {fullname!r}: the compat shim maps it to "
                f"{' or '.join(map(repr, names))}, which threadline does not have",
                name=fullname,
            )
        spec = importlib.machinery.ModuleSpec(fullname, _AliasLoader(modules))
        # Every alias may have submodules: the finder decides, not the search path.
        spec.submodule_search_locations = []
        return spec


def _import_if_present(name: str) -> ModuleType | None:
    """The module ``name``, or None if it does not exist (an error inside it still raises)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and name.startswith(exc.name):
            return None
        raise


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, LangGraphAliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, LangGraphAliasFinder())


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        raise SystemExit("usage: python tests/compat/shim.py PROGRAM.py")
    install()
    sys.argv = argv[1:]
    runpy.run_path(argv[1], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv)
