"""Give each public object its public home.

A class or function is defined in a private ``_x`` module and exported by its subpackage's
``__init__``. Left alone, it reports the private module (``bindloop.loop._machine.LoopMachine`` in a
traceback, in ``repr`` and in the docs), which is neither where users import it from nor a name that
stays stable. :func:`publish` rewrites ``__module__`` to the exporting module, as trio does.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from typing import Final, ForwardRef

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
        if isinstance(obj, type) and not _pin_annotations(obj, home):
            continue  # its annotations could not be pinned: keep the module they resolve in
        try:
            obj.__module__ = module
        except (AttributeError, TypeError):
            # A builtin or a generic alias: its module is not ours to set.
            continue


# From 3.14 a ForwardRef evaluated with explicit globals (msgspec passes the namespace of
# ``cls.__module__``) ignores its own module; its extra names are still consulted.
_EXPLICIT_GLOBALS_WIN: Final = sys.version_info >= (3, 14)


def _pin_annotations(cls: type, home: str) -> bool:
    # Postponed annotations are strings that msgspec and typing resolve in the namespace of
    # ``cls.__module__``; once that names the public package, ``"Message"`` would no longer be
    # found. A ForwardRef that remembers the defining module resolves there instead. Nothing is
    # evaluated now, so import cost stays the same. False: this Python offers no way to pin.
    annotations = cls.__dict__.get("__annotations__")
    if not isinstance(annotations, dict):
        return True
    names = vars(sys.modules[home]) if _EXPLICIT_GLOBALS_WIN else None
    pinned: dict[str, ForwardRef] = {}
    for field, value in annotations.items():
        if isinstance(value, ForwardRef) and value.__forward_module__ is None:
            value = value.__forward_arg__  # NamedTuple wraps its strings, without a module
        if isinstance(value, str):
            ref = _forward_ref(value, home)
            if names is not None:
                try:
                    ref.__extra_names__ = names  # type: ignore[attr-defined]
                except AttributeError:
                    return False
            pinned[field] = ref
    annotations.update(pinned)
    return True


def _forward_ref(arg: str, module: str) -> ForwardRef:
    # Before 3.14 the constructor compiles ``arg`` at once (~17 us each, ~10 ms over the package);
    # eval() takes the source text just as well, so the compile waits until msgspec or typing first
    # resolves the annotation. Where the slots differ, the constructor is the safe fallback.
    if not _EXPLICIT_GLOBALS_WIN:
        ref = ForwardRef.__new__(ForwardRef)
        try:
            ref.__forward_arg__ = arg
            ref.__forward_code__ = arg  # type: ignore[assignment]
            ref.__forward_evaluated__ = False
            ref.__forward_value__ = None
            ref.__forward_is_argument__ = False
            ref.__forward_is_class__ = True
            ref.__forward_module__ = module
            return ref
        except AttributeError:
            pass
    return ForwardRef(arg, module=module, is_class=True)

