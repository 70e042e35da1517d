"""Progressive tool disclosure: a registry instance, the initial active set and the catalog partition."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

import msgspec

from .._keyed import index_unique
from ..contracts import ToolCall, ToolDefinition, ToolError, ToolOutcome
from ..errors import UsageError
from ._plugin import PluginSummary, ToolPlugin, summarize_plugin

__all__ = (
    "PluginCatalog",
    "ToolRegistry",
    "create_tool_registry",
    "initial_active_plugins",
    "partition_plugin_catalog",
)

P = TypeVar("P", bound=ToolPlugin[Any])


class ToolRegistry(Generic[P]):
    """Plugins by canonical name. Made by :func:`create_tool_registry`; there is no shared default.

    Aliases are permanent: persisted activation state stores names, so an alias is how a rename keeps
    live sessions' capabilities without a data migration. :meth:`get` and every ``active`` argument
    accept old names.
    """

    __slots__ = ("_aliases", "_core", "_on_register", "_plugins")

    def __init__(self, *, core_plugins: Iterable[str], aliases: Mapping[str, str],
                 on_register: Callable[[P], None] | None) -> None:
        self._aliases = _close_aliases(aliases)
        self._core = tuple(dict.fromkeys(self.canonicalize_name(n) for n in core_plugins))
        self._on_register = on_register
        self._plugins: dict[str, P] = {}

    def __repr__(self) -> str:
        return f"ToolRegistry(plugins={sorted(self._plugins)!r}, core={list(self._core)!r})"

    def canonicalize_name(self, name: str) -> str:
        """The current name for ``name`` (itself unless it is an alias)."""
        return self._aliases.get(name, name)

    def register(self, plugin: P) -> None:
        """Add ``plugin`` and call ``on_register(plugin)``.

        Raises
        ------
        UsageError
            A plugin with that name is registered already, or the name is an alias (the alias would
            shadow it forever).
        """
        name = plugin.name
        if not isinstance(name, str) or not name:
            raise UsageError(f"plugin name must be a non-empty string, got {name!r}")
        if name in self._aliases:
            raise UsageError(f"plugin name {name!r} is an alias of {self._aliases[name]!r}")
        if name in self._plugins:
            raise UsageError(f"plugin {name!r} is already registered")
        self._plugins[name] = plugin
        if self._on_register is not None:
            self._on_register(plugin)

    def get(self, name: str) -> P | None:
        """The plugin registered under ``name`` or the name it aliases, else ``None``."""
        return self._plugins.get(self.canonicalize_name(name))

    def core_plugins(self) -> tuple[str, ...]:
        """The canonical names of the core plugins, as configured (registered or not)."""
        return self._core

    def plugins(self) -> tuple[P, ...]:
        """Every registered plugin, ordered by name (registration order never leaks out)."""
        return tuple(self._plugins[n] for n in sorted(self._plugins))

    def summaries(self) -> tuple[PluginSummary, ...]:
        """One catalog entry per registered plugin, ordered by name."""
        return tuple(summarize_plugin(p) for p in self.plugins())

    def _active(self, active: Iterable[str]) -> list[P]:
        names = sorted({self.canonicalize_name(n) for n in active})
        return [self._plugins[n] for n in names if n in self._plugins]

    def _owners(self, active: Iterable[str]) -> dict[str, P]:
        owners: dict[str, P] = {}
        for plugin in self._active(active):
            for definition in plugin.tool_definitions():
                other = owners.get(definition.name)
                if other is not None:
                    raise UsageError(
                        f"tool {definition.name!r} is defined by both {other.name!r} and "
                        f"{plugin.name!r}; a provider rejects duplicate tool names"
                    )
                owners[definition.name] = plugin
        return owners

    def tool_definitions(self, active: Iterable[str]) -> list[ToolDefinition]:
        """The definitions of every tool in the ``active`` plugins, plugins ordered by name and tools
        in each plugin's order. Unknown names are skipped (a rehydrated set may hold stale ones).

        Raises
        ------
        UsageError
            Two active plugins define the same tool name.
        """
        self._owners(active)
        return [d for p in self._active(active) for d in p.tool_definitions()]

    def find_tool(self, tool_name: str, active: Iterable[str]) -> P | None:
        """The active plugin that defines ``tool_name``, else ``None``."""
        return self._owners(active).get(tool_name)

    async def run_tool_call(self, call: ToolCall, ctx: Any, active: Iterable[str]) -> ToolOutcome:
        """Dispatch ``call`` to the active plugin that defines its tool. A tool no active plugin
        defines comes back as a ``not_found`` error the model can read, never a raise."""
        plugin = self.find_tool(call.name, active)
        if plugin is None:
            return ToolError(error=f"Unknown tool {call.name!r}: no active plugin defines it",
                             kind="not_found")
        return await plugin.execute(call.name, call.arguments, ctx)


def _close_aliases(aliases: Mapping[str, str]) -> dict[str, str]:
    """Follow alias chains to their end once, so lookups are one step; refuse cycles."""
    closed: dict[str, str] = {}
    for start in aliases:
        seen = [start]
        name = aliases[start]
        while name in aliases:
            if name in seen:
                raise UsageError(f"alias cycle: {' -> '.join([*seen, name])}")
            seen.append(name)
            name = aliases[name]
        closed[start] = name
    return closed


def create_tool_registry(
    *,
    core_plugins: Iterable[str] = (),
    aliases: Mapping[str, str] | None = None,
    on_register: Callable[[P], None] | None = None,
) -> ToolRegistry[P]:
    """A new, empty registry. ``core_plugins`` are loaded from the first turn; ``aliases`` map old
    names to current ones (chains are followed); ``on_register`` is called with each plugin as it is
    registered (e.g. to index the skills it contributes).

    Raises
    ------
    UsageError
        The aliases form a cycle.
    """
    return ToolRegistry(core_plugins=core_plugins, aliases=aliases or {}, on_register=on_register)


def initial_active_plugins(core_plugins: Iterable[str]) -> tuple[str, ...]:
    """The active set a fresh session starts with: the core plugins, de-duplicated, sorted."""
    return tuple(sorted(set(core_plugins)))


class PluginCatalog(msgspec.Struct, frozen=True, kw_only=True):
    """The catalog as data: ``active`` plugins (loaded), ``loadable`` ones (announced, activatable),
    and ``unknown`` active names with no summary. Every tuple is ordered by name, so rendering equal
    inputs gives equal bytes whatever order plugins were registered or activated in."""

    active: tuple[PluginSummary, ...]
    loadable: tuple[PluginSummary, ...]
    unknown: tuple[str, ...] = ()


def partition_plugin_catalog(active: Iterable[str],
                             summaries: Iterable[PluginSummary]) -> PluginCatalog:
    """Split ``summaries`` into loaded and loadable. Returns data, not prose: the wording is the
    host's, and a stable order is what keeps a provider's prompt-cache prefix intact.

    Raises
    ------
    UsageError
        Two different summaries share a name.
    """
    by_name = index_unique(summaries, lambda s: s.name,
                           lambda name: f"two different summaries are named {name!r}")
    wanted = set(active)
    return PluginCatalog(
        active=tuple(by_name[n] for n in sorted(by_name) if n in wanted),
        loadable=tuple(by_name[n] for n in sorted(by_name) if n not in wanted),
        unknown=tuple(sorted(wanted - by_name.keys())),
    )
