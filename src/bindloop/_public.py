"""Give each public object its public home.

A class or function is defined in a private ``_x`` module and exported by its subpackage's
``__init__``. Left alone, it reports the private module (``bindloop.loop._machine.LoopMachine`` in a
traceback, in ``repr`` and in the docs), which is neither where users import it from nor a name that
stays stable. :func:`publish` rewrites ``__module__`` to the exporting module, as trio does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import ForwardRef

__all__ = ("publish",)


def _is_private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split("."))


def publish(module: str, namespace: Mapping[str, object], names: Iterable[str]) -> None:
    """Set ``__module__`` to ``module`` for every class and function named in ``names`` that still
    reports a private module. Objects already homed elsewhere (imported from another public
    module) are left alone, so only the module that first exports a name claims it. Type aliases,
    constants and other values carry no ``__module__`` of their own and are skipped."""
    for name in names:
        obj = namespace[name]
        if not isinstance(obj, type) and not callable(obj):
            continue
        home = getattr(obj, "__module__", None)
        if not isinstance(home, str) or not _is_private(home):
            continue
        if isinstance(obj, type):
            _pin_annotations(obj, home)
        try:
            obj.__module__ = module
        except (AttributeError, TypeError):
            # A builtin or a generic alias: its module is not ours to set.
            continue


def _pin_annotations(cls: type, home: str) -> None:
    # Postponed annotations are strings that msgspec and typing resolve in the namespace of
    # ``cls.__module__``; once that names the public package, ``"Message"`` would no longer be
    # found. A ForwardRef that remembers the defining module resolves there instead. Nothing is
    # evaluated now, so import cost stays the same.
    annotations = cls.__dict__.get("__annotations__")
    if not isinstance(annotations, dict):
        return
    for field, value in annotations.items():
        if isinstance(value, str):
            annotations[field] = ForwardRef(value, module=home, is_class=True)
