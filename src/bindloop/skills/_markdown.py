"""SKILL.md: YAML frontmatter plus a markdown body, over a YAML implementation the host injects."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Protocol

import msgspec

from ..errors import PortContractError, UsageError
from ._model import SkillSpec
from ._errors import SkillFormatError

__all__ = (
    "ParsedSkillMarkdown",
    "YamlPort",
    "parse_skill_markdown",
    "serialize_skill_markdown",
)


class YamlPort(Protocol):
    """The YAML implementation you bring (e.g. PyYAML's ``safe_load`` / ``safe_dump``)."""

    def parse(self, text: str) -> Any: ...

    def stringify(self, value: Mapping[str, Any]) -> str: ...


class ParsedSkillMarkdown(msgspec.Struct, frozen=True, kw_only=True):
    """The skill, the frontmatter keys it does not model (``license``, ``metadata``,
    ``allowed-tools``, ...) and the warnings about what was repaired or defaulted."""

    skill: SkillSpec
    extra: dict[str, Any] = msgspec.field(default_factory=dict)
    warnings: tuple[str, ...] = ()


_FENCE = re.compile(r"^---[ \t]*$")
_CLOSE = re.compile(r"^(---|\.\.\.)[ \t]*$")
# Only the key and the separator are matched by regex; the value is cut with str methods. Every
# pattern here is linear: no two adjacent repetitions can trade characters (that was cubic before).
_PLAIN_KEY = re.compile(r"(?P<key>\s*[A-Za-z0-9_.-]+):[ \t]+")
_WHEN_KEYS = ("when_to_use", "when-to-use", "whenToUse")


def _plain(line: str) -> tuple[str, str] | None:
    """``(key, value)`` of a ``key: value`` line whose value ends in a non-space, else ``None``."""
    match = _PLAIN_KEY.match(line)
    if match is None:
        return None
    value = line[match.end():].rstrip(" \t")
    if not value or value[-1].isspace():
        return None
    return match.group("key"), value


_BRACKETS = re.compile(r"[\[\]{}]")
# PyYAML takes time quadratic in flow-collection depth (5,000 `[` cost 2.5 s here, 60,000 minutes),
# so deep nesting is refused before the YAML port sees it. Quotes are not tracked: a value holding
# that many brackets has to be a block scalar.
_MAX_FLOW_DEPTH = 64


def _bracket_depth(text: str) -> int:
    depth = deepest = 0
    for match in _BRACKETS.finditer(text):
        if match.group() in "[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth = max(0, depth - 1)
    return deepest


def _first_heading(body: str) -> str | None:
    """The text of the first ATX heading (``# Title``, ``## Title ##``), in one pass."""
    for line in body.split("\n"):
        rest = line.lstrip("#")
        level = len(line) - len(rest)
        if not 1 <= level <= 6 or not rest[:1].isspace():
            continue
        text = rest.strip()
        closing = text.rstrip("#")
        if closing != text and (not closing or closing[-1].isspace()):
            text = closing.rstrip()  # a closing run of '#' needs a space before it
        if text:
            return text
    return None


def _split(text: str) -> tuple[str, str] | None:
    lines = text.split("\n")
    if not lines or not _FENCE.match(lines[0]):
        return None
    for i in range(1, len(lines)):
        if _CLOSE.match(lines[i]):
            body = "\n".join(lines[i + 1:])
            # The blank line after the fence is layout, not content (serialize writes one).
            return "\n".join(lines[1:i]), body[1:] if body.startswith("\n") else body
    return None


def _repair_colons(front: str) -> tuple[str, list[str]]:
    """Quote plain scalars that contain ``": "`` — the commonest hand-written frontmatter mistake
    (``description: Use when: the user asks``)."""
    fixed: list[str] = []
    keys: list[str] = []
    for line in front.split("\n"):
        plain = _plain(line)
        if plain is not None and plain[1][0] not in "\"'[{|>&*!#%@`" and (
                ": " in plain[1] or plain[1].endswith(":")):
            key, value = plain
            escaped = value.replace("\\", "\\\\").replace('"', '\\"')
            fixed.append(f'{key}: "{escaped}"')
            keys.append(key.strip())
        else:
            fixed.append(line)
    return "\n".join(fixed), keys


def _slug(text: str) -> str:
    return "-".join(re.findall(r"[a-z0-9]+", text.lower()))[:64].strip("-")


def parse_skill_markdown(raw: str, *, yaml: YamlPort, fallback_name: str | None = None,
                         max_frontmatter_chars: int = 65_536) -> ParsedSkillMarkdown:
    """Read a SKILL.md leniently.

    Repairs (each with a warning): unquoted values containing ``": "``; a missing ``name`` (taken
    from ``fallback_name``, else the first heading, else the description); a non-string scalar
    ``name`` / ``description`` / ``when_to_use``. ``when-to-use`` and ``whenToUse`` are read as
    ``when_to_use``. Everything else in the frontmatter is returned in ``extra``.

    Everything here is linear in the file. The frontmatter goes to the host's YAML parser only
    when it is at most ``max_frontmatter_chars`` long: a hostile file (200 KB of ``[``) can keep a
    YAML implementation busy for many seconds, and real frontmatter is a few hundred characters.

    Raises
    ------
    SkillFormatError
        No frontmatter, frontmatter longer than ``max_frontmatter_chars``, frontmatter that is not
        YAML (after repair) or not a mapping, or no description — the one field with no sensible
        default.
    """
    text = raw.removeprefix("\ufeff").replace("\r\n", "\n")
    split = _split(text)
    if split is None:
        raise SkillFormatError("SKILL.md has no frontmatter, so no description")
    front, body = split
    if len(front) > max_frontmatter_chars:
        raise SkillFormatError(
            f"SKILL.md frontmatter is {len(front)} characters, over max_frontmatter_chars="
            f"{max_frontmatter_chars}; frontmatter holds a name and a description, the body the rest")
    depth = _bracket_depth(front)
    if depth > _MAX_FLOW_DEPTH:
        raise SkillFormatError(
            f"SKILL.md frontmatter nests brackets {depth} deep (at most {_MAX_FLOW_DEPTH}); quote "
            "a value that really holds that many")
    warnings: list[str] = []
    try:
        data = yaml.parse(front)
    except Exception as first:
        repaired, keys = _repair_colons(front)
        if not keys:
            raise SkillFormatError(f"SKILL.md frontmatter is not YAML: {first}") from first
        try:
            data = yaml.parse(repaired)
        except Exception as exc:
            raise SkillFormatError(f"SKILL.md frontmatter is not YAML: {first}") from exc
        warnings.append(f"quoted unquoted values containing ': ' in {', '.join(keys)}")
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise SkillFormatError(f"SKILL.md frontmatter is a {type(data).__name__}, not a mapping")
    fields = dict(data)

    def text_field(key: str) -> str | None:
        value = fields.pop(key, None)
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, (int, float, bool)):
            warnings.append(f"{key} was not a string; converted")
            return str(value)
        raise SkillFormatError(f"SKILL.md {key} must be text, got {type(value).__name__}")

    description = text_field("description")
    if description is None or not description.strip():
        raise SkillFormatError("SKILL.md has no description")
    name = text_field("name")
    when: str | None = None
    for key in _WHEN_KEYS:
        if key in fields:
            value = text_field(key)
            when = when if when is not None else value
    if not name:
        heading = _first_heading(body)
        candidates = [fallback_name, _slug(heading) if heading else None,
                      _slug(description)]
        name = next(c for c in candidates if c) if any(candidates) else "skill"
        warnings.append(f"name was missing; using {name!r}")
    skill = SkillSpec(name=name, description=description.strip(), body=body, when_to_use=when)
    return ParsedSkillMarkdown(skill=skill, extra={str(k): v for k, v in fields.items()},
                               warnings=tuple(warnings))


def serialize_skill_markdown(skill: SkillSpec, *, yaml: YamlPort,
                             extra: Mapping[str, Any] | None = None) -> str:
    """Write ``skill`` as SKILL.md: ``name``, ``description``, ``when_to_use`` (when set) and then
    ``extra`` keys in the frontmatter, a blank line, the body. :func:`parse_skill_markdown` reads the
    result back to an equal skill.

    Raises
    ------
    UsageError
        ``extra`` tries to override a field the skill owns.
    PortContractError
        ``yaml.stringify`` returned something other than text.
    """
    front: dict[str, Any] = {"name": skill.name, "description": skill.description}
    if skill.when_to_use is not None:
        front["when_to_use"] = skill.when_to_use
    for key, value in (extra or {}).items():
        if key in front or key in _WHEN_KEYS:
            raise UsageError(f"extra frontmatter key {key!r} would override the skill's own field")
        front[key] = value
    rendered = yaml.stringify(front)
    if not isinstance(rendered, str):
        raise PortContractError("yaml.stringify must return str")
    return f"---\n{rendered.rstrip(chr(10))}\n---\n\n{skill.body}"
