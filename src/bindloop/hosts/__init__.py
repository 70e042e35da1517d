"""I/O bindings for hosts (outside the fences): the demo CLI today; HTTP transports later.

Nothing in the core imports this package.
"""

__all__ = ()
