"""A check frame's nullable columns (``make_columns_frame``): the fast conversion of a list or an object array
(through Arrow) is pandas' own conversion. A frame put in order (``sorted_by``) is the frame pandas sorts. The
distinct rows of integer columns (``distinct_rows``) are pandas' factorization of them; the rows whose previous row
has their key (``same_key_as_previous``) are those pandas' shift within groups pairs."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.quality.frames import (
    PartitionRows,
    distinct_rows,
    make_columns_frame,
    same_key_as_previous,
    sorted_by,
)

_INT64 = st.integers(min_value=-(2 ** 63), max_value=2 ** 63 - 1)
_VALUES = st.one_of(
    st.lists(st.none() | _INT64),
    st.lists(st.none() | st.integers()),  # past 64 bits: both refuse
    st.lists(st.none() | st.booleans()),
    st.lists(st.none() | _INT64 | st.booleans() | st.floats(allow_nan=False) | st.text(max_size=2)),
)


def _column(values: list[Any], dtype: str) -> pd.Series:
    return make_columns_frame({"c": values}, {"c": dtype})["c"]


def _outcome(make: Any) -> tuple[str, Any]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # pandas casting huge floats, on its way to refusing
            return "ok", make()
    except (TypeError, ValueError, OverflowError) as e:
        return "error", type(e)


@settings(max_examples=300, deadline=None)
@given(values=_VALUES, dtype=st.sampled_from(["Int64", "boolean", "string", "object"]))
def test_a_column_is_the_series_pandas_makes_of_the_list(values: list[Any], dtype: str) -> None:
    reference = _outcome(lambda: pd.Series(values, dtype=dtype, name="c"))
    # A list, and the same values as an object array (a column taken from a table, or concatenated).
    for given_as in (values, np.array([*values, object()], dtype=object)[:-1]):
        fast = _outcome(lambda: _column(given_as, dtype))  # noqa: B023 - called at once
        assert fast[0] == reference[0]
        if fast[0] == "ok":
            assert fast[1].dtype == reference[1].dtype
            pd.testing.assert_series_equal(fast[1], reference[1])


@pytest.mark.parametrize(("values", "dtype"), [
    ([3, None, 2 ** 63 - 1, -(2 ** 63), 0], "Int64"),
    ([True, None, False, None], "boolean"),
    ([None, None], "Int64"),
    ([], "boolean"),
])
def test_nulls_stay_null_and_values_keep_their_places(values: list[Any], dtype: str) -> None:
    series = _column(values, dtype)
    assert str(series.dtype) == dtype
    assert [None if pd.isna(v) else v for v in series.tolist()] == values


_KEYS = st.lists(st.tuples(st.sampled_from(["b", "a", "c"]), st.integers(0, 3), st.integers(0, 3)), max_size=40)


@settings(max_examples=300, deadline=None)
@given(rows=_KEYS, presorted=st.booleans(), with_null=st.booleans())
def test_sorted_by_is_pandas_sort(rows: list[tuple[str, int, int]], presorted: bool, with_null: bool) -> None:
    """Rows in order already (as a history comes from the tables) come back as they are, any other order sorted;
    either way the order pandas' sort gives, ties in their own order, a categorical by its codes."""
    frame = pd.DataFrame({"topic": pd.Categorical([t for t, _, _ in rows], categories=["a", "c", "b"]),
                          "partition": pd.array([p for _, p, _ in rows], dtype="Int64"),
                          "start": np.array([s for _, _, s in rows], dtype=np.int64),
                          "n": range(len(rows))})
    if with_null and rows:
        frame.loc[0, "partition"] = pd.NA
    keys = ["topic", "partition", "start"]
    if presorted:
        frame = frame.sort_values(keys).reset_index(drop=True)
    got = sorted_by(frame, keys)
    pd.testing.assert_frame_equal(got, frame.sort_values(keys))
    if presorted and not with_null:
        assert got is frame


_CELLS = st.lists(st.none() | st.lists(st.none() | st.integers(-(2 ** 31), 2 ** 31 - 1), max_size=4), max_size=12)


@settings(max_examples=200, deadline=None)
@given(cells=_CELLS, start=st.integers(0, 3))
def test_partition_rows_from_arrow_are_those_from_pandas(cells: list[list[int | None] | None], start: int) -> None:
    """The partitions' list columns read from the Arrow table are the tuples read from pandas' cells (a null cell
    (), a null value refused the same way), whatever chunks and slices the table comes in."""
    lists = pa.array(cells, pa.list_(pa.int32()))
    n = len(cells)
    whole = pa.table({
        "topic_id": ["t"] * n, "partition_id": pa.array(range(n), pa.int32()),
        **dict.fromkeys(("replicas", "isr", "removing_replicas", "adding_replicas", "eligible_leader_replicas",
                         "last_known_elr"), lists),
        "directories": pa.array([[]] * n, pa.list_(pa.string())),
        **{name: pa.array([0] * n, pa.int32()) for name in ("leader", "leader_recovery_state", "leader_epoch",
                                                             "partition_epoch")},
    })
    table = pa.concat_tables([whole.slice(start), whole.slice(0, start)])  # two chunks, one of them a slice
    frame = table.to_pandas()
    expected = _outcome(lambda: PartitionRows.of(frame))
    assert _outcome(lambda: PartitionRows.of(frame, table)) == expected


_INT_COLUMNS = st.integers(1, 3).flatmap(lambda width: st.lists(
    st.tuples(*[st.integers(-3, 3) | _INT64] * width), max_size=40))


@settings(max_examples=300, deadline=None)
@given(rows=_INT_COLUMNS)
def test_distinct_rows_are_pandas_factorization_of_the_rows(rows: list[tuple[int, ...]]) -> None:
    """Small values pack into one integer a row; values spanning more than 62 bits go pandas' way: both give
    pandas' codes and its distinct rows, in the order they first appear."""
    if not rows:
        which, distinct = distinct_rows([np.empty(0, np.int64)])
        assert len(which) == 0 and distinct == []
        return
    columns = [np.array(column, dtype=np.int64) for column in zip(*rows, strict=True)]
    which, distinct = distinct_rows(columns)
    codes, uniques = pd.factorize(pd.MultiIndex.from_arrays(columns))
    assert which.tolist() == codes.tolist()
    assert distinct == [tuple(int(v) for v in row) for row in uniques]


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b", None]), st.integers(0, 2), st.integers(0, 9)),
                     max_size=30))
def test_a_rows_previous_row_has_its_key_where_pandas_shift_within_groups_pairs_them(
        rows: list[tuple[str | None, int, int]]) -> None:
    """In a frame sorted by its key (a categorical with a null among its texts, an integer), a row's previous row
    has its key exactly where ``groupby(key).shift()`` gives the row that row's value."""
    frame = pd.DataFrame(rows, columns=["k", "n", "v"]).astype({"k": "category"})
    frame = frame.sort_values(["k", "n"], kind="stable").reset_index(drop=True)
    frame["at"] = np.arange(len(frame), dtype=float)
    shifted = frame.groupby(["k", "n"], sort=False, observed=True)["at"].shift()
    expected = [shifted[i] == i - 1 for i in range(1, len(frame))]
    assert same_key_as_previous(frame, ["k", "n"]).tolist() == expected
