"""Resolving a run's model selection into an ordered fallback chain of provider + model targets."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from ..errors import UsageError

__all__ = (
    "FallbackProvider",
    "FallbackTarget",
    "ModelSelection",
    "UnknownProviderError",
    "resolve_fallback_chain",
)


class UnknownProviderError(UsageError):
    """A target names a provider that is not configured, or the provider list itself is invalid
    (empty, or several providers with a blank or duplicate name)."""


class FallbackProvider(msgspec.Struct, frozen=True, kw_only=True):
    """A configured provider: its name and the model used when a selection names none."""

    name: str
    default_model: str | None = None


class FallbackTarget(msgspec.Struct, frozen=True, kw_only=True):
    """One entry of a chain. In a selection, ``provider=None`` fans out across every provider."""

    model: str
    provider: str | None = None


ModelSelection = None | str | Sequence[str | FallbackTarget]


def _check_providers(providers: Sequence[FallbackProvider]) -> None:
    if not providers:
        raise UnknownProviderError("at least one provider is required")
    if len(providers) == 1:
        return  # a lone provider's name plays no part in resolving targets
    seen: set[str] = set()
    for p in providers:
        if not p.name.strip():
            raise UnknownProviderError("with several providers every provider needs a name")
        if p.name in seen:
            raise UnknownProviderError(f"duplicate provider name {p.name!r}")
        seen.add(p.name)


def resolve_fallback_chain(providers: Sequence[FallbackProvider],
                           selection: ModelSelection = None) -> tuple[FallbackTarget, ...]:
    """Expand ``selection`` into targets, primary first, duplicates removed (first kept).

    ``None``: each provider's ``default_model``, in provider order (providers without one are
    skipped). A string: that model on every provider, in provider order. A sequence: entries in
    order; a :class:`FallbackTarget` with a provider resolves to that provider, a bare string or a
    provider-less target fans out across every provider. Raises :class:`UnknownProviderError` for
    an unknown provider name or an invalid provider list, and :class:`~bindloop.errors.UsageError`
    when the chain would be empty — at construction, not mid-run.
    """
    _check_providers(providers)
    names = [p.name for p in providers]
    known = set(names)
    raw: list[FallbackTarget] = []
    if selection is None:
        raw = [FallbackTarget(provider=p.name, model=p.default_model)
               for p in providers if p.default_model]
    else:
        entries: Sequence[str | FallbackTarget] = (
            [selection] if isinstance(selection, str) else selection)
        for entry in entries:
            target = FallbackTarget(model=entry) if isinstance(entry, str) else entry
            if target.provider is None:
                raw.extend(FallbackTarget(provider=n, model=target.model) for n in names)
            elif target.provider not in known:
                raise UnknownProviderError(
                    f"unknown provider {target.provider!r}; configured: {sorted(known)}")
            else:
                raw.append(target)
    chain: list[FallbackTarget] = []
    seen: set[tuple[str | None, str]] = set()
    for t in raw:
        key = (t.provider, t.model)
        if key not in seen:
            seen.add(key)
            chain.append(t)
    if not chain:
        raise UsageError("the model selection resolves to no target (no model named and no "
                         "provider has a default model)")
    return tuple(chain)
