"""The skills package's errors: a SKILL.md that cannot be read."""

from __future__ import annotations

from ..errors import UsageError

__all__ = (
    "SkillFormatError",
)


class SkillFormatError(UsageError):
    """A SKILL.md that cannot be read: its frontmatter is not YAML (even after repair) or not a
    mapping, or it has no description."""
