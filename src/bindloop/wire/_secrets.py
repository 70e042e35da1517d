"""The one redaction rule of the wire path: no credential a request carries reaches an exception
message, a ``repr``, a log line, a trace attribute or the model.

A :class:`Redactor` knows the credentials of one transport (the values of its credential-bearing
headers, the user info and secret query parameters of its base URL) and blanks every occurrence
of them, in the forms a server echoes them in: as sent, JSON-escaped (also twice, and with ``\\/``),
and URL-encoded. Independently of what it knows, it blanks what is a credential by its shape:
``Bearer``/``Basic`` tokens, secret query parameters (``key=``, ``api_key=``, ``access_token=``,
...) and the user info of a URL. Every error the wire path makes from a response or a transport
failure passes it (``_call.py``), and the transports build their own messages through it.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable, Mapping

from ..errors import ProviderError
from ._errors import (
    IncompleteStreamError,
    ProviderHttpError,
    SseError,
    TransportError,
    WireDecodeError,
)
from .._percent import percent_decode as _unquote, percent_encode as _quote
from ._types import REDACTED, Headers, redact_headers

__all__ = ("REDACTED", "Redactor", "scrub_shapes", "transport_redactor")

WITHHELD = "<withheld: the text contained a credential>"
# Shorter values (the "none" or "test" a local server accepts) are not searched for: blanking
# every occurrence of such a word would garble messages without protecting anything.
MIN_SECRET_CHARS = 8
_TAIL_CHARS = 4  # shown of a long credential ("<redacted …4e22>"), as providers' own masks do
_TAIL_MIN_CHARS = 20
_SECRET_PARAMS = ("key", "api_key", "apikey", "api-key", "access_token", "token", "auth",
                  "sig", "signature", "secret", "client_secret", "password", "x-goog-api-key")
_QUERY = re.compile(
    r"(?i)([?&;](?:key|api[_-]?key|access[_-]?token|token|auth|sig|signature|secret|"
    r"client[_-]?secret|password|x-goog-api-key)=)([^&#\s\"'<>\\]+)")
# Case-sensitive, and a Basic token needs a digit, "+" or "/" anywhere, a capital after its first
# character, or padding: "Basic Authentication" in a provider's prose is not a credential.
_SCHEME_TOKEN = re.compile(
    r"\b(Bearer|bearer|BEARER)(\s+)([A-Za-z0-9._~+/=-]{8,})"
    r"|\b(Basic)(\s+)((?=[A-Za-z0-9+/]*?[0-9+/]|[A-Za-z0-9+/][A-Za-z0-9+/]*?[A-Z]"
    r"|[A-Za-z0-9+/]*=)[A-Za-z0-9+/]{8,}={0,2})")
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^/\s@\"'<>?#]+)@")


def scrub_shapes(text: str) -> str:
    """The shape rule alone: what is a credential by its form, whoever sent it."""
    text = _QUERY.sub(lambda m: m.group(1) + REDACTED, text)
    text = _SCHEME_TOKEN.sub(lambda m: (m.group(1) or m.group(4)) + (m.group(2) or m.group(5))
                             + REDACTED, text)
    return _USERINFO.sub(lambda m: m.group(1) + REDACTED + "@", text)


def _url_secrets(url: str) -> list[str]:
    """The user info and the values of secret query parameters of ``url``, as written and
    decoded."""
    rest = url.partition("://")[2].split("#", 1)[0]
    authority, _, query = rest.partition("?")
    authority = authority.split("/", 1)[0]
    found: list[str] = []
    if "@" in authority:
        user, _, password = authority.rpartition("@")[0].partition(":")
        found += [user, password]
    for pair in query.split("&"):
        name, eq, value = pair.partition("=")
        if eq and _unquote(name.replace("+", " ")).lower() in _SECRET_PARAMS:
            found.append(value)
    return [form for value in found if value for form in (value, _unquote(value))]


def _forms(secret: str) -> set[str]:
    """``secret`` in the spellings a server may echo it in."""
    escaped = {json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}
    escaped |= {json.dumps(e, ensure_ascii=a)[1:-1] for e in tuple(escaped) for a in (True, False)}
    escaped |= {e.replace("/", "\\/") for e in tuple(escaped)}
    encoded = {_quote(secret), _quote(secret, "/"), _quote(secret, plus=True),
               _quote(secret, "/", plus=True)}
    encoded |= {re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), e) for e in encoded}
    return {secret} | escaped | encoded


def _credential_values(value: str) -> list[str]:
    """A credential header's value, and the token inside ``Bearer x`` / ``Basic x`` (with the
    user and password a Basic token encodes)."""
    out = [value]
    scheme, _, token = value.lstrip().partition(" ")
    if token.strip() and scheme.lower() in ("bearer", "basic", "token"):
        out += [token, token.strip()]  # the key as given, whitespace and all, and as trimmed
        token = token.strip()
        if scheme.lower() == "basic":
            try:
                decoded = base64.b64decode(token, validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                decoded = ""
            out += [decoded, *decoded.partition(":")[::2]]
    return out


class Redactor:
    """Blanks known credentials and credential-shaped text. ``Redactor()`` knows none and applies
    the shape rule only; :meth:`for_credentials` builds a transport's. Its ``repr`` never shows
    what it knows."""

    __slots__ = ("_forms", "_marks")

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        marks: dict[str, str] = {}
        for secret in secrets:
            if not isinstance(secret, str) or len(secret) < MIN_SECRET_CHARS:
                continue
            mark = (f"<redacted …{secret[-_TAIL_CHARS:]}>" if len(secret) >= _TAIL_MIN_CHARS
                    else REDACTED)
            for form in _forms(secret):
                if len(form) >= MIN_SECRET_CHARS:
                    marks.setdefault(form, mark)
        # Longest first: "Bearer sk-x" goes before "sk-x", a JSON-escaped form before its parts.
        self._forms = tuple(sorted(marks, key=len, reverse=True))
        self._marks = marks

    @classmethod
    def for_credentials(cls, base_url: str, headers: Headers) -> Redactor:
        """The redactor of a transport that sends ``headers`` to ``base_url``: every value of a
        credential-bearing header (by :func:`~bindloop.wire._types.redact_headers`' rule), and
        the user info and secret query parameters of the URL."""
        pairs = tuple(headers.items() if isinstance(headers, Mapping) else headers)
        secrets: list[str] = []
        for (_, value), (_, shown) in zip(pairs, redact_headers(pairs), strict=True):
            if shown != value:
                secrets += _credential_values(value)
        secrets += _url_secrets(base_url)
        return cls(secrets)

    def __repr__(self) -> str:
        return f"Redactor(<{len(self._forms)} forms>)"

    def _leaks(self, text: str) -> bool:
        return any(form in text for form in self._forms)

    def text(self, text: str) -> str:
        """``text`` with every known credential and credential-shaped value blanked. If a
        replacement ever formed a credential anew, the whole text is withheld instead."""
        for form in self._forms:
            if form in text:
                text = text.replace(form, self._marks[form])
        text = scrub_shapes(text)
        return WITHHELD if self._leaks(text) else text

    def body(self, data: bytes, limit: int) -> bytes:
        """An error body read for classification: redacted, then cut to ``limit`` bytes, with a
        credential's beginning that the cut left at the end blanked too."""
        text = self.text(data.decode("utf-8", "replace"))
        encoded = text.encode("utf-8")
        if len(encoded) <= limit:
            return encoded
        out = encoded[:limit].decode("utf-8", "ignore")
        for form in self._forms:
            for k in range(min(len(form), len(out)) - 1, _TAIL_CHARS - 1, -1):
                if out.endswith(form[:k]):
                    out = out[:-k] + REDACTED
                    break
        return out.encode("utf-8")

    def _shows(self, exc: BaseException) -> bool:
        text = f"{exc!s} {exc!r}"
        return self.text(text) != text

    def clean(self, exc: BaseException) -> bool:
        """Whether no text of ``exc`` or of the exceptions it chains (as a traceback shows them)
        shows a credential."""
        seen: set[int] = set()
        current: BaseException | None = exc
        while current is not None and id(current) not in seen:
            seen.add(id(current))
            if self._shows(current):
                return False
            current = _chained(current)
        return True

    def exception(self, exc: Exception, *, foreign: bool = True,
                  cause: BaseException | None = None) -> Exception:
        """``exc`` itself when :meth:`clean`, else an equivalent error whose message is redacted.
        A chain that shows a credential is cut (``cause``, when given, is chained only if it shows
        none). The wire's own errors keep their type (a :class:`ProviderHttpError` its category,
        status and retry hint); any other exception a transport raised becomes a
        :class:`TransportError` naming its type. With ``foreign=False`` (an exception from the
        consumer's own code) only the wire's own errors are replaced: a host's exception is the
        host's to word."""
        if cause is not None:
            exc.__cause__ = cause if self.clean(cause) else None
            exc.__suppress_context__ = True
        if self.clean(exc):
            return exc
        chained = _chained(exc)
        keep = chained if chained is not None and self.clean(chained) else None
        if not self._shows(exc):  # only the chain does: cut it
            exc.__cause__ = keep
            exc.__suppress_context__ = True
            return exc
        new: Exception
        if isinstance(exc, ProviderHttpError):
            new = exc.redacted(self.text)
        elif isinstance(exc, TransportError):
            new = TransportError(self.text(str(exc)), kind=exc.kind)
        elif type(exc) in (WireDecodeError, IncompleteStreamError, SseError, ProviderError):
            new = type(exc)(self.text(str(exc)))
        elif foreign:
            new = TransportError(f"the transport failed: {type(exc).__name__}: "
                                 f"{self.text(str(exc))}")
        else:
            return exc
        if self._shows(new):  # the provider's text and the error's own wording formed one
            new = _withheld(new)
        new.__cause__ = keep
        new.__suppress_context__ = True
        return new.with_traceback(exc.__traceback__)


def _withheld(exc: Exception) -> Exception:
    if isinstance(exc, ProviderHttpError):
        return exc.redacted(lambda _: WITHHELD)
    if isinstance(exc, TransportError):
        return TransportError(WITHHELD, kind=exc.kind)
    return type(exc)(WITHHELD)


def _chained(exc: BaseException) -> BaseException | None:
    """The exception a traceback shows ``exc`` was raised from or during."""
    if exc.__cause__ is not None or exc.__suppress_context__:
        return exc.__cause__
    return exc.__context__


def transport_redactor(transport: object) -> Redactor:
    """The redactor a transport offers as its ``redactor`` attribute (the shipped transports do),
    else one that applies the shape rule only."""
    redactor = getattr(transport, "redactor", None)
    return redactor if isinstance(redactor, Redactor) else Redactor()
