"""Rows' JSON text made by Arrow's kernels (``pipelines.lakehouse.jsontext``, ``jbod image --tables --json``) is the
text the reference encoder writes for the rows' Python values, byte for byte — or, where a value or a type needs
more than those kernels say, nothing, and the reference encoder writes that slice.

Generated tables of every column kind the image's lists hold (integers of two widths, booleans, text, lists of
those), nulls and empty lists included, text from all of Unicode (quotes, backslashes and control characters
included, which JSON escapes), plus a kind with no text form here (floats), read through an arbitrary slice (so
that every buffer's offset is exercised)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from jbod_model.records.json_codec import Slices, dumps_pieces, dumps_without_floats
from pipelines.lakehouse.jsontext import rows_json, text_slices

_TEXT = st.one_of(st.text(max_size=8), st.text(st.characters(codec="ascii", exclude_characters='"\\'), max_size=8)
                  .filter(lambda s: all(c >= " " for c in s)), st.just("AAAAAAAAAAAAAAAAAAAAAA"),
                  # Each character JSON escapes, alone among others: generated text rarely holds a quote or a backslash.
                  st.sampled_from(['a"b', "c\\d", "e\x1ff", '"', "\\", "\x00", "é\u2028"]))

#: (Arrow type, strategy of one value, whether this module writes it).
_KINDS: list[tuple[pa.DataType, st.SearchStrategy[Any], bool]] = [
    (pa.int32(), st.integers(-(2**31), 2**31 - 1), True),
    (pa.int64(), st.integers(-(2**63), 2**63 - 1), True),
    (pa.bool_(), st.booleans(), True),
    (pa.string(), _TEXT, True),
    (pa.list_(pa.int32()), st.lists(st.none() | st.integers(-(2**31), 2**31 - 1), max_size=4), True),
    (pa.list_(pa.string()), st.lists(st.none() | _TEXT, max_size=3), True),
    (pa.list_(pa.bool_()), st.lists(st.booleans(), max_size=3), True),
    (pa.float64(), st.floats(allow_nan=False, allow_infinity=False), False),
]


@st.composite
def _tables(draw: st.DrawFn) -> tuple[pa.Table, list[str], bool]:
    """A table, its columns' JSON names, and whether every column is of a kind written here."""
    rows = draw(st.integers(0, 12))
    kinds = draw(st.lists(st.sampled_from(range(len(_KINDS))), min_size=1, max_size=5))
    names = draw(st.lists(st.text(max_size=5), min_size=len(kinds), max_size=len(kinds), unique=True))
    columns = [pa.array(draw(st.lists(st.none() | _KINDS[k][1], min_size=rows, max_size=rows)), _KINDS[k][0])
               for k in kinds]
    return pa.table(columns, names=[f"c{i}" for i in range(len(kinds))]), names, all(_KINDS[k][2] for k in kinds)


def _objects(table: pa.Table, names: list[str]) -> list[dict[str, Any]]:
    return [dict(zip(names, row, strict=True)) for row in zip(*(c.to_pylist() for c in table.columns), strict=True)]


def _escaped(table: pa.Table) -> bool:
    """Whether a text value of ``table`` (in a list or not) holds a character JSON escapes."""
    def texts(value: Any) -> list[str]:
        return [value] if isinstance(value, str) else [t for v in value for t in texts(v)] if isinstance(
            value, list) else []
    return any(c in '"\\' or c < " " for column in table.columns for value in column.to_pylist()
               for text in texts(value) for c in text)


@given(drawn=_tables(), data=st.data())
def test_rows_text_is_the_reference_encoders_or_nothing(drawn: tuple[pa.Table, list[str], bool],
                                                        data: st.DataObject) -> None:
    table, names, written = drawn
    lo = data.draw(st.integers(0, table.num_rows))
    part = table.slice(lo, data.draw(st.integers(0, table.num_rows - lo)))
    text = rows_json(part, names)
    if part.num_rows and (not written or _escaped(part)):
        assert text is None
    else:
        assert text == dumps_without_floats(_objects(part, names))[1:-1]


@given(drawn=_tables(), rows=st.integers(1, 5), threads=st.integers(1, 3))
def test_a_list_written_from_text_slices_is_the_list(drawn: tuple[pa.Table, list[str], bool], rows: int,
                                                     threads: int) -> None:
    """Slices the kernels cannot write come as Python rows, in their place: the list is the rows' whatever mix."""
    table, names, _ = drawn
    doc = {"rows": Slices(text_slices(table, names, lambda part: _objects(part, names), rows=rows, threads=threads))}
    assert "".join(dumps_pieces(doc)) == dumps_without_floats({"rows": _objects(table, names)})


@pytest.mark.parametrize("char", ['"', "\\", "\x00", "\x1f"])
@pytest.mark.parametrize("kind", [pa.string(), pa.list_(pa.string())])
def test_a_character_json_escapes_leaves_the_slice_to_the_reference_encoder(char: str, kind: pa.DataType) -> None:
    value = f"a{char}b"
    table = pa.table([pa.array([1, 2], pa.int32()), pa.array([value if kind == pa.string() else [value], None], kind)],
                     names=["c0", "c1"])
    assert rows_json(table, ["n", "s"]) is None
    assert rows_json(table.slice(1), ["n", "s"]) == '{"n":2,"s":null}'  # the value is outside the slice
    doc = {"rows": Slices(text_slices(table, ["n", "s"], lambda part: _objects(part, ["n", "s"]), rows=1))}
    assert "".join(dumps_pieces(doc)) == dumps_without_floats({"rows": _objects(table, ["n", "s"])})
