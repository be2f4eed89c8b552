"""A check frame's nullable columns (``make_columns_frame``): the fast conversion of a list (through Arrow) is pandas'
own conversion."""

from __future__ import annotations

import warnings
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.quality.frames import make_columns_frame

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
    fast = _outcome(lambda: _column(values, dtype))
    reference = _outcome(lambda: pd.Series(values, dtype=dtype, name="c"))
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
