"""The check every model the agent API is handed goes through (``create_agent``, ``run_with``,
``augment_model``): a :class:`~bindloop.model.Model`, refused early with what it lacks."""

from __future__ import annotations

from ..errors import UsageError
from ..model import Model

__all__ = ("checked_model",)

_NEEDS = ("id", "provider", "structured_output", "price", "stream", "complete")
_MAY_BE_NONE = frozenset({"provider"})


def checked_model(model: object, where: str) -> Model:
    """``model`` itself when it has every member of :class:`~bindloop.model.Model`, else a
    :class:`~bindloop.errors.UsageError` naming ``where`` and the members it lacks. Checked once
    (when the model is handed over), never per call."""
    missing = [name for name in _NEEDS
               if (not hasattr(model, name) if name in _MAY_BE_NONE
                   else getattr(model, name, None) is None)]
    if missing:
        raise UsageError(
            f"{where}: {type(model).__name__} is not a bindloop.model.Model (it lacks "
            f"{', '.join(missing)}): pass a ModelAdapter, a RoutedModel, a StreamModel subclass "
            "or another object with id, provider, structured_output, price, stream and complete")
    return model  # type: ignore[return-value]
