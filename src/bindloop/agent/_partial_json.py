"""The best value of a JSON document that is still arriving (live structured output).

The value of a truncated prefix is *prefix-consistent* with the finished document: an object holds
a subset of the final keys, an array a prefix of the final elements, a string a prefix of the final
string, and every value inside is itself consistent. So a UI can render it now and never has to take
anything back — only extend it. To keep that promise a number is shown only once a delimiter ends it
(``12`` may still become ``123``), a key only once its closing quote arrives, and a truncated escape
or a high surrogate waiting for its pair is held back; ``t``/``f``/``n`` already show ``true`` /
``false`` / ``null``, their only completions.

One pass, no backtracking: :func:`parse_partial_json` is linear in the text, and
:class:`PartialJsonParser` is linear over a whole stream however it is chunked (re-parsing every
prefix would be quadratic), a long string still open included: its text is kept as fragments and
joined only when :attr:`PartialJson.value` is read. The grammar is strict JSON (RFC 8259): no
``NaN``/``Infinity``, no leading zeros, no trailing commas, no raw control characters in strings;
a complete document parses to exactly what ``json.loads`` returns. A prefix no continuation can
make valid (``01``, ``1.2.3``) is ``invalid`` as soon as the offending character arrives.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

from ..errors import UsageError

__all__ = ("PartialJson", "PartialJsonParser", "PartialJsonState", "parse_partial_json")

PartialJsonState: TypeAlias = Literal["complete", "partial", "invalid"]
"""``complete``: the text so far is a whole JSON document (a top-level number may still grow);
``partial``: a valid prefix of one; ``invalid``: no continuation can make it JSON."""


class PartialJson:
    """The best value so far. ``value`` is ``None`` when nothing has been read yet (check
    ``state``; a document ``null`` reads the same). For ``invalid``, ``value`` is what was read
    before the error and ``error`` says where it went wrong.

    Read-only. ``value`` is computed on first read when a string is still open at the end of the
    text fed so far (joining that string is the only cost that grows with the document, so a
    caller that does not look pays nothing); later reads return the same object. Equality
    compares ``value``, ``state`` and ``error``.
    """

    __slots__ = ("_error", "_materialize", "_state", "_value")

    def __init__(self, *, value: Any, state: PartialJsonState, error: str | None = None) -> None:
        self._value = value
        self._state: PartialJsonState = state
        self._error = error
        self._materialize: Callable[[], Any] | None = None

    @classmethod
    def _deferred(cls, materialize: Callable[[], Any], state: PartialJsonState) -> PartialJson:
        out = cls(value=None, state=state)
        out._materialize = materialize
        return out

    @property
    def value(self) -> Any:
        if self._materialize is not None:
            self._value = self._materialize()
            self._materialize = None
        return self._value

    @property
    def state(self) -> PartialJsonState:
        return self._state

    @property
    def error(self) -> str | None:
        return self._error

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PartialJson):
            return NotImplemented
        return (self._state == other._state and self._error == other._error
                and self.value == other.value)

    __hash__ = None  # type: ignore[assignment]  # the value is mutable (and live)

    def __repr__(self) -> str:
        error = "" if self._error is None else f", error={self._error!r}"
        return f"PartialJson(value={self.value!r}, state={self._state!r}{error})"


# What the parser expects next.
_VALUE, _VALUE_OR_CLOSE, _KEY_OR_CLOSE, _KEY, _COLON, _COMMA_OR_CLOSE, _DONE = range(7)
_IN_STRING, _IN_NUMBER, _IN_LITERAL, _INVALID = range(7, 11)

_WS = re.compile(r"[ \t\n\r]*")
_STR_RUN = re.compile(r'[^"\\\x00-\x1f]+')
_NUM_RUN = re.compile(r"[0-9eE.+\-]+")
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_SIMPLE_ESCAPES: Mapping[str, str] = MappingProxyType({
    '"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
})
_LITERALS: Mapping[str, tuple[str, Any]] = MappingProxyType({
    "t": ("true", True), "f": ("false", False), "n": ("null", None),
})
_NOTHING: Any = object()  # no top-level value yet (distinct from a parsed null)

# The RFC 8259 number grammar as a DFA, so a prefix no continuation can repair (a leading zero, a
# second '.', a sign after digits) is refused at the character that breaks it.
_N_START, _N_MINUS, _N_ZERO, _N_INT, _N_DOT, _N_FRAC, _N_E, _N_ESIGN, _N_EXP = range(9)
_N_ACCEPT = frozenset({_N_ZERO, _N_INT, _N_FRAC, _N_EXP})
_N_DIGITS_LOOP = frozenset({_N_INT, _N_FRAC, _N_EXP})  # states a run of digits keeps
_D = "0123456789"


def _edges(**groups: int) -> Mapping[str, int]:
    out: dict[str, int] = {}
    for chars, target in groups.items():
        for c in {"minus": "-", "sign": "+-", "zero": "0", "nonzero": _D[1:], "digit": _D,
                  "dot": ".", "exp": "eE"}[chars]:
            out[c] = target
    return MappingProxyType(out)


_NUM_NEXT: tuple[Mapping[str, int], ...] = (
    _edges(minus=_N_MINUS, zero=_N_ZERO, nonzero=_N_INT),        # start
    _edges(zero=_N_ZERO, nonzero=_N_INT),                        # after '-'
    _edges(dot=_N_DOT, exp=_N_E),                                # after a leading 0
    _edges(digit=_N_INT, dot=_N_DOT, exp=_N_E),                  # integer digits
    _edges(digit=_N_FRAC),                                       # after '.'
    _edges(digit=_N_FRAC, exp=_N_E),                             # fraction digits
    _edges(sign=_N_ESIGN, digit=_N_EXP),                         # after 'e'
    _edges(digit=_N_EXP),                                        # after the exponent sign
    _edges(digit=_N_EXP),                                        # exponent digits
)
# A string's fragments are joined in groups of this many, so a long string fed a few characters
# at a time holds a few thousand chunks rather than one object per feed; each character is copied
# once here and once when the value is read.
_COMPACT = 64


def _number(text: str) -> int | float:
    # Same conversion json.loads performs: int for integer syntax, float otherwise.
    if "." in text or "e" in text or "E" in text:
        return float(text)
    return int(text)


class PartialJsonParser:
    """Parses one JSON document fed in chunks; :meth:`feed` returns the best value after each.

    The returned ``value`` is **live**: its containers are the parser's own and later ``feed``
    calls extend them in place (that is what keeps a stream linear). Copy it to keep a snapshot.
    (A top-level string is the exception: being immutable, it is the prefix fed when ``feed``
    returned.) Cost per ``feed``: amortised O(len(chunk)). Reading ``value`` while a string is
    open joins that string: O(its length), so read it per rendered frame rather than per chunk
    when one string grows large. Once ``invalid``, further chunks are ignored.
    """

    __slots__ = (
        "_error", "_esc", "_expect", "_high", "_lit", "_lit_target", "_num", "_num_len",
        "_num_state",
        "_offset", "_root", "_slot", "_stack", "_str_is_key", "_str_len", "_str_loose",
        "_str_parts",
    )

    def __init__(self) -> None:
        self._expect = _VALUE
        self._root: Any = _NOTHING
        # Open containers; an object frame keeps its pending key beside it.
        self._stack: list[list[Any]] = []
        self._offset = 0
        self._error: str | None = None
        self._str_parts: list[str] = []
        self._str_loose = 0  # fragments at the end of _str_parts not yet joined into a chunk
        self._str_len = 0  # characters in the open string so far
        self._str_is_key = False
        self._esc = ""
        self._high: int | None = None
        # Where the open string value lives: (container, key or index), or None for the root.
        self._slot: tuple[Any, Any] | None = None
        self._num: list[str] = []
        self._num_len = 0
        self._num_state = _N_START
        self._lit = ""
        self._lit_target = ""

    # -- public ------------------------------------------------------------------------------------

    def feed(self, chunk: str) -> PartialJson:
        """Consume ``chunk`` and return the best value of everything fed so far."""
        if not isinstance(chunk, str):
            raise UsageError(f"feed() takes str, got {type(chunk).__name__}")
        if self._expect != _INVALID and chunk:
            self._consume(chunk)
            self._offset += len(chunk)
        return self.result()

    def result(self) -> PartialJson:
        """The best value of everything fed so far, without feeding more."""
        if self._expect == _INVALID:
            return PartialJson(value=self._value(), state="invalid", error=self._error)
        if self._expect == _IN_STRING and not self._str_is_key:
            return PartialJson._deferred(
                self._open_string(self._str_len, self._slot is None), "partial")
        if self._expect == _DONE:
            return PartialJson(value=self._root, state="complete")
        if (self._expect == _IN_NUMBER and not self._stack and self._num_state in _N_ACCEPT
                and not self._int_too_long()):
            return PartialJson(value=_number("".join(self._num)), state="complete")
        return PartialJson(value=self._value(), state="partial")

    # -- internals ---------------------------------------------------------------------------------

    def _value(self) -> Any:
        return None if self._root is _NOTHING else self._root

    def _fail(self, message: str, at: int) -> int:
        if self._expect == _IN_STRING and not self._str_is_key:
            self._store(self._joined())  # invalid keeps what was read, the open string included
        self._error = f"{message} at offset {self._offset + at}"
        self._expect = _INVALID
        return -1

    def _open_string(self, length: int, at_root: bool) -> Callable[[], Any]:
        """What a result taken while a string value is open reads as its value, when read."""
        def materialize() -> Any:
            if self._expect == _IN_STRING and not self._str_is_key:
                self._store(self._joined())  # the containers are live: give them the text
            if at_root:
                root = self._root
                # A root string is immutable: return the prefix this result stood for.
                return root[:length] if isinstance(root, str) and len(root) > length else root
            return self._value()
        return materialize

    def _str_add(self, text: str) -> None:
        parts = self._str_parts
        parts.append(text)
        self._str_len += len(text)
        self._str_loose += 1
        if self._str_loose >= _COMPACT:
            parts[-_COMPACT:] = ["".join(parts[-_COMPACT:])]
            self._str_loose = 0

    def _joined(self) -> str:
        parts = self._str_parts
        if len(parts) > 1:
            parts[:] = ["".join(parts)]
            self._str_loose = 0
        return parts[0] if parts else ""

    def _start_string(self, is_key: bool) -> None:
        self._str_parts = []
        self._str_loose = 0
        self._str_len = 0
        self._str_is_key = is_key
        self._expect = _IN_STRING

    def _place(self, value: Any) -> tuple[Any, Any] | None:
        """Put a (possibly still growing) value where the grammar says it goes; return its slot."""
        if not self._stack:
            self._root = value
            return None
        frame = self._stack[-1]
        container = frame[0]
        if isinstance(container, list):
            container.append(value)
            return (container, len(container) - 1)
        container[frame[1]] = value
        return (container, frame[1])

    def _store(self, value: Any) -> None:
        slot = self._slot
        if slot is None:
            self._root = value
        else:
            slot[0][slot[1]] = value

    def _after_value(self) -> None:
        if not self._stack:
            self._expect = _DONE
        else:
            frame = self._stack[-1]
            if isinstance(frame[0], dict):
                frame[1] = None
            self._expect = _COMMA_OR_CLOSE

    def _consume(self, chunk: str) -> None:
        i, n = 0, len(chunk)
        while i < n:
            expect = self._expect
            if expect == _IN_STRING:
                i = self._scan_string(chunk, i)
            elif expect == _IN_NUMBER:
                m = _NUM_RUN.match(chunk, i)
                if m is not None:
                    i = self._number_run(m.group(), i)
                    if i < 0:
                        return
                if i < n:  # a delimiter ends the number; it is consumed by the structural step
                    i = self._end_number(i)
            elif expect == _IN_LITERAL:
                i = self._scan_literal(chunk, i)
            else:
                i = _WS.match(chunk, i).end()  # type: ignore[union-attr]  # always matches
                if i < n:
                    i = self._structural(chunk, i)
            if i < 0:
                return

    def _number_run(self, run: str, i: int) -> int:
        state = self._num_state
        if not (state in _N_DIGITS_LOOP and run.isdigit()):
            for k, c in enumerate(run):
                state = _NUM_NEXT[state].get(c, -1)
                if state < 0:
                    text = "".join(self._num) + run[:k + 1]
                    return self._fail(f"invalid number {text!r}", i + k)
        self._num_state = state
        self._num.append(run)
        self._num_len += len(run)
        return i + len(run)

    def _int_too_long(self) -> bool:
        """Whether the number so far is integer text past CPython's int conversion limit
        (``int()`` and ``json.loads`` raise on it). ``1234…`` may still become a float, so only a
        number that ended is refused for it."""
        if self._num_state != _N_INT:
            return False
        limit = sys.get_int_max_str_digits()
        return bool(limit) and self._num_len - (self._num[0][0] == "-") > limit

    def _end_number(self, i: int) -> int:
        if self._int_too_long():
            self._num = []
            return self._fail(f"integer of {self._num_len} characters is over the int conversion "
                              f"limit of {sys.get_int_max_str_digits()} digits", i - self._num_len)
        text = "".join(self._num)
        self._num = []
        if self._num_state not in _N_ACCEPT:
            return self._fail(f"invalid number {text!r}", i - len(text))
        self._place(_number(text))
        self._after_value()
        return i

    def _scan_literal(self, chunk: str, i: int) -> int:
        target, lit, n = self._lit_target, self._lit, len(chunk)
        while i < n and len(lit) < len(target):
            if chunk[i] != target[len(lit)]:
                return self._fail(f"invalid literal (expected {target!r})", i)
            lit += chunk[i]
            i += 1
        self._lit = lit
        if len(lit) == len(target):
            self._after_value()
        return i

    def _start_value(self, c: str, i: int) -> int:
        if c == '"':
            self._slot = self._place("")
            self._start_string(is_key=False)
            return i + 1
        if c == "{" or c == "[":
            container: dict[str, Any] | list[Any] = {} if c == "{" else []
            self._place(container)
            self._stack.append([container, None])
            self._expect = _KEY_OR_CLOSE if c == "{" else _VALUE_OR_CLOSE
            return i + 1
        if c == "-" or "0" <= c <= "9":
            self._num = []
            self._num_len = 0
            self._num_state = _N_START
            self._expect = _IN_NUMBER
            return i
        literal = _LITERALS.get(c)
        if literal is not None:
            # Shown at once: each literal has a single completion.
            self._lit_target, value = literal
            self._lit = ""
            self._place(value)
            self._expect = _IN_LITERAL
            return i
        return self._fail(f"unexpected {c!r} where a value was expected", i)

    def _close(self, c: str, i: int) -> int:
        container = self._stack[-1][0]
        if (c == "}") != isinstance(container, dict):
            return self._fail(f"mismatched {c!r}", i)
        self._stack.pop()
        self._after_value()
        return i + 1

    def _structural(self, chunk: str, i: int) -> int:
        c = chunk[i]
        expect = self._expect
        if expect == _VALUE:
            return self._start_value(c, i)
        if expect == _VALUE_OR_CLOSE:
            return self._close(c, i) if c == "]" else self._start_value(c, i)
        if expect == _KEY_OR_CLOSE or expect == _KEY:
            if c == '"':
                self._start_string(is_key=True)
                return i + 1
            if c == "}" and expect == _KEY_OR_CLOSE:
                return self._close(c, i)
            return self._fail(f"unexpected {c!r} where a key was expected", i)
        if expect == _COLON:
            if c == ":":
                self._expect = _VALUE
                return i + 1
            return self._fail(f"unexpected {c!r} where ':' was expected", i)
        if expect == _COMMA_OR_CLOSE:
            if c == ",":
                self._expect = _KEY if isinstance(self._stack[-1][0], dict) else _VALUE
                return i + 1
            if c == "}" or c == "]":
                return self._close(c, i)
            return self._fail(f"unexpected {c!r} where ',' or a closing bracket was expected", i)
        # _DONE: only whitespace may follow a complete document.
        return self._fail(f"unexpected {c!r} after the end of the document", i)

    def _flush_high(self) -> None:
        if self._high is not None:
            # A high surrogate not followed by its pair stays a lone code point, as in json.loads.
            self._str_add(chr(self._high))
            self._high = None

    def _scan_string(self, chunk: str, i: int) -> int:
        n = len(chunk)
        while i < n:
            if self._esc:
                i = self._scan_escape(chunk, i)
                if i < 0 or self._esc:
                    return i
                continue
            m = _STR_RUN.match(chunk, i)
            if m is not None:
                self._flush_high()
                self._str_add(m.group())
                i = m.end()
                continue
            c = chunk[i]
            if c == '"':
                self._flush_high()
                self._end_string()
                return i + 1
            if c == "\\":
                self._esc = "\\"
                i += 1
                continue
            return self._fail(f"unescaped control character {c!r} in a string", i)
        return i

    def _scan_escape(self, chunk: str, i: int) -> int:
        esc = self._esc
        need = 6 if len(esc) > 1 and esc[1] == "u" else 2
        if len(esc) == 1:
            esc += chunk[i]
            i += 1
            if esc[1] == "u":
                need = 6
        take = min(need - len(esc), len(chunk) - i)
        esc += chunk[i:i + take]
        i += take
        if len(esc) < need:
            self._esc = esc
            return i
        self._esc = ""
        if need == 2:
            decoded = _SIMPLE_ESCAPES.get(esc[1])
            if decoded is None:
                return self._fail(f"invalid escape {esc!r}", i - 2)
            self._flush_high()
            self._str_add(decoded)
            return i
        if not _HEX4.fullmatch(esc, 2):
            return self._fail(f"invalid escape {esc!r}", i - 6)
        code = int(esc[2:], 16)
        if 0xD800 <= code <= 0xDBFF:
            self._flush_high()
            self._high = code  # held back: the next escape may be its pair
        elif 0xDC00 <= code <= 0xDFFF and self._high is not None:
            self._str_add(chr(0x10000 + ((self._high - 0xD800) << 10) + (code - 0xDC00)))
            self._high = None
        else:
            self._flush_high()
            self._str_add(chr(code))
        return i

    def _end_string(self) -> None:
        text = self._joined()
        self._str_parts = []
        self._str_loose = self._str_len = 0
        if self._str_is_key:
            self._stack[-1][1] = text
            self._expect = _COLON
        else:
            self._store(text)
            self._slot = None
            self._after_value()


def parse_partial_json(text: str) -> PartialJson:
    """The best value of ``text`` read as a possibly truncated JSON document. Never raises on
    truncation or bad JSON (the state says which), nor on an integer too long for ``int()`` (a
    value ending one is ``invalid``; a top-level one still open stays ``partial``, since a ``.5``
    could make it a float); linear in ``len(text)``. For a stream, feed a
    :class:`PartialJsonParser` instead of calling this on every prefix."""
    return PartialJsonParser().feed(text)
