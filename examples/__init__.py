"""The everyday programs (``python examples/<name>.py``) and the runnable demos (:mod:`examples.demos`).

Not shipped in the wheel; run from the repository root."""
