"""``pipelines.quality.apart``: a call in a second interpreter — its result, its expected error, its crash."""

from __future__ import annotations

import pytest

from jbod_model.errors import InputError, JbodError
from jbod_model.uuid import Uuid
from pipelines.quality.apart import Apart


def test_the_call_returns_what_it_returned_there() -> None:
    with Apart(Uuid.from_string, "KfaKMz6vRniukx00uvRwwA") as call:
        assert call.result() == Uuid.from_string("KfaKMz6vRniukx00uvRwwA")


def test_an_expected_error_there_is_raised_here_as_itself() -> None:
    with Apart(Uuid.from_string, "not a uuid") as call, pytest.raises(InputError, match="not a valid base64url"):
        call.result()


def test_a_crash_there_is_one_error_naming_its_last_line() -> None:
    with Apart(int, "x") as call, pytest.raises(JbodError, match=r"stopped \(exit 1\): ValueError: invalid literal"):
        call.result()
