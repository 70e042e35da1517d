"""The best value of a JSON document that is still arriving (live structured output):
:func:`parse_partial_json` reads a prefix once, a :class:`PartialJsonParser` reads a stream chunk by
chunk. Every value shown is prefix-consistent with the finished document, so a UI only ever extends
what it rendered.
"""

from ._partial_json import (
    PartialJson as PartialJson,
    PartialJsonParser as PartialJsonParser,
    PartialJsonState as PartialJsonState,
    parse_partial_json as parse_partial_json,
)

__all__ = (
    "PartialJson",
    "PartialJsonParser",
    "PartialJsonState",
    "parse_partial_json",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
