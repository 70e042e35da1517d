from __future__ import annotations

import json
import math
import random
import shutil
import struct
import subprocess
from collections import OrderedDict
from decimal import Decimal
from types import MappingProxyType

import pytest
from hypothesis import given, strategies as st

from bindloop.run import CanonicalJsonError, canonical_json, canonical_json_bytes, format_number


def from_hex(h: str) -> float:
    return struct.unpack(">d", bytes.fromhex(h))[0]


# RFC 8785 Appendix B: IEEE-754 bit patterns and their canonical text.
RFC_NUMBERS = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
    ("c43211ede4974a35", "-333333333333333300000"),
]


@pytest.mark.parametrize(("bits", "text"), RFC_NUMBERS)
def test_rfc8785_number_vectors(bits: str, text: str) -> None:
    assert format_number(from_hex(bits)) == text


@pytest.mark.parametrize("bits", ["7fffffffffffffff", "7ff0000000000000", "fff0000000000000"])
def test_nan_and_infinities_are_refused(bits: str) -> None:
    with pytest.raises(CanonicalJsonError):
        format_number(from_hex(bits))
    with pytest.raises(CanonicalJsonError, match="/x"):
        canonical_json({"x": from_hex(bits)})


@pytest.mark.parametrize(("value", "text"), [
    (1.0, "1"), (-1.5, "-1.5"), (1e21, "1e+21"), (1e20, "100000000000000000000"), (1e-7, "1e-7"),
    (1.5e-7, "1.5e-7"), (123e-20, "1.23e-18"), (0.1, "0.1"), (100, "100"), (-0, "0"),
    (2**53, "9007199254740992"), (2**60, "1152921504606847000"), (10**21, "1e+21"),
    (1e23, "1e+23"),
])
def test_layout_rules(value: float, text: str) -> None:
    assert format_number(value) == text


def test_inexact_integers_are_refused() -> None:
    with pytest.raises(CanonicalJsonError, match="not exactly representable"):
        canonical_json(2**53 + 1)
    with pytest.raises(CanonicalJsonError, match="not exactly representable"):
        canonical_json(10**23)
    with pytest.raises(CanonicalJsonError, match="double range"):
        canonical_json(10**400)


RFC_MAIN_INPUT = r'''{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}'''
RFC_MAIN_OUTPUT = (
    '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
    '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
)


def test_rfc8785_main_example() -> None:
    assert canonical_json(json.loads(RFC_MAIN_INPUT)) == RFC_MAIN_OUTPUT
    assert canonical_json_bytes(json.loads(RFC_MAIN_INPUT)) == RFC_MAIN_OUTPUT.encode("utf-8")


RFC_SORT_INPUT = r'''{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}'''


def test_rfc8785_sorting_example_uses_utf16_code_units() -> None:
    out = json.loads(canonical_json(json.loads(RFC_SORT_INPUT)), object_pairs_hook=list)
    assert [v for _, v in out] == [
        "Carriage Return", "One", "Control", "Latin Small Letter O With Diaeresis", "Euro Sign",
        "Emoji: Grinning Face", "Hebrew Letter Dalet With Dagesh",
    ]  # U+1F600 (surrogates D83D DE00) sorts before U+FB33, unlike by code point


def test_string_escaping_is_minimal() -> None:
    assert canonical_json("\x00\x08\t\n\x0b\x0c\r\x1f\x7f\"\\/é😀") == (
        '"\\u0000\\b\\t\\n\\u000b\\f\\r\\u001f\x7f\\"\\\\/é😀"'
    )


@pytest.mark.parametrize(("value", "where"), [
    ({1: "a"}, "<root>"), ({"a": {(1, 2): 1}}, "/a"), ({"s": {1, 2}}, "/s"), (b"x", "<root>"),
    ([Decimal("1.0")], "/0"), ({"a/b": [object()]}, "/a~1b/0"), ("\ud800", "<root>"),
    ({"k": "x\udfff"}, "/k"), ([frozenset()], "/0"),
])
def test_unsupported_values_are_refused_with_a_path(value: object, where: str) -> None:
    with pytest.raises(CanonicalJsonError) as info:
        canonical_json(value)
    assert str(info.value).endswith(f"at {where}")


def test_lone_surrogate_in_a_key_is_refused() -> None:
    with pytest.raises(CanonicalJsonError):
        canonical_json({"\ud800": 1})


def test_cycles_are_refused_but_shared_references_are_fine() -> None:
    a: list[object] = []
    a.append(a)
    with pytest.raises(CanonicalJsonError, match="cycle"):
        canonical_json(a)
    d: dict[str, object] = {}
    d["self"] = {"again": d}
    with pytest.raises(CanonicalJsonError, match="cycle at /self/again"):
        canonical_json(d)
    shared = [1, 2]
    assert canonical_json({"a": shared, "b": shared}) == '{"a":[1,2],"b":[1,2]}'


def test_mappings_tuples_and_deep_nesting() -> None:
    assert canonical_json(MappingProxyType({"b": (1, 2), "a": OrderedDict(z=None)})) == \
        '{"a":{"z":null},"b":[1,2]}'
    deep: object = 0
    for _ in range(20_000):
        deep = [deep]
    assert canonical_json(deep) == "[" * 20_000 + "0" + "]" * 20_000


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=30,
)


def _no_surrogates(v: object) -> bool:
    return "\\ud" not in json.dumps(v)


@given(JSON.filter(_no_surrogates))
def test_round_trip_and_idempotence(value: object) -> None:
    text = canonical_json(value)
    # Read numbers as I-JSON does (IEEE doubles): a large float prints as integer digits.
    back = json.loads(text, parse_int=float)
    assert back == value
    assert canonical_json(back) == text


@given(st.dictionaries(st.text(max_size=6), st.integers(-(2**53), 2**53), max_size=8).filter(_no_surrogates),
       st.randoms())
def test_member_order_never_matters(d: dict[str, int], rnd: random.Random) -> None:
    items = list(d.items())
    rnd.shuffle(items)
    assert canonical_json(dict(items)) == canonical_json(d)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_numbers_round_trip_exactly(x: float) -> None:
    text = format_number(x)
    assert float(text) == x
    assert "E" not in text and not text.startswith("+") and (x != 0 or text == "0")


@pytest.mark.skipif(shutil.which("node") is None, reason="node is the ECMAScript oracle")
def test_numbers_agree_with_ecmascript_number_to_string() -> None:
    rnd = random.Random(8785)
    values = [struct.unpack(">d", rnd.getrandbits(64).to_bytes(8, "big"))[0] for _ in range(3000)]
    values += [rnd.uniform(-1e6, 1e6) for _ in range(1000)] + [10.0**e for e in range(-30, 30)]
    values = [v for v in values if math.isfinite(v)]
    hexes = [struct.pack(">d", v).hex() for v in values]
    script = ("const xs=JSON.parse(require('fs').readFileSync(0,'utf8'));"
              "console.log(JSON.stringify(xs.map(h=>String(Buffer.from(h,'hex').readDoubleBE(0)))))")
    out = subprocess.run(["node", "-e", script], input=json.dumps(hexes), capture_output=True,
                         text=True, check=True, timeout=60).stdout
    expected = json.loads(out)
    mismatches = [(v, format_number(v), e) for v, e in zip(values, expected) if format_number(v) != e]
    assert mismatches == []
