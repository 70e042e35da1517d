"""Shared access to tests/fixtures/<provider>/."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def fixture(wire: str, name: str) -> bytes:
    return (FIXTURES / wire / name).read_bytes()


def stream_fixtures() -> list[tuple[str, str]]:
    return sorted((p.parent.name, p.name) for p in FIXTURES.glob("*/*.sse"))
