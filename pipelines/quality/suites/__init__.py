"""The suites, one module each — ``structural``, ``semantic``, ``history``, ``log``, ``external``
(:data:`pipelines.config.profiles.SUITE_NAMES`). A suite module declares its expectations (``CHECKS``), the
invariants it cannot check yet (``SKIPS``) and the frame builders its expectations read (``FRAMES``, by frame name);
a new check is one :class:`~pipelines.quality.expectations.Check` there, plus a frame column if it needs a new one.
docs/data-quality.md lists every expectation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from jbod_model.errors import InputError
from pipelines.config.profiles import SUITE_NAMES, QualitySettings
from pipelines.quality.expectations import Check, Skip
from pipelines.quality.frames import Build, Frame, FrameBuilder
from pipelines.quality.inputs import ExternalInputs, TableSet
from pipelines.quality.suites import external, history, log, semantic, structural

_MODULES = {"structural": structural, "semantic": semantic, "history": history, "log": log, "external": external}
#: Every expectation, suite by suite in :data:`~pipelines.config.profiles.SUITE_NAMES` order.
CHECKS: tuple[Check, ...] = tuple(c for name in SUITE_NAMES for c in _MODULES[name].CHECKS)
#: Invariants no suite can check yet, and why.
SKIPS: tuple[Skip, ...] = tuple(s for name in SUITE_NAMES for s in _MODULES[name].SKIPS)
#: Every frame builder, by frame name (a frame may serve expectations of several suites).
FRAMES: Mapping[str, FrameBuilder] = {frame: builder for name in SUITE_NAMES
                                      for frame, builder in _MODULES[name].FRAMES.items()}


def checks_for(suites: Sequence[str]) -> list[Check]:
    """The expectations of the named suites, in :data:`CHECKS` order."""
    unknown = [s for s in suites if s not in SUITE_NAMES]
    if unknown:
        raise InputError(f"unknown suite(s) {', '.join(unknown)} (suites: {', '.join(SUITE_NAMES)})")
    return [c for c in CHECKS if c.suite in suites]


def build_frames(tables: TableSet, checks: Sequence[Check], settings: QualitySettings | None = None,
                 inputs: ExternalInputs = ExternalInputs()) -> dict[str, Frame]:
    """The frames ``checks`` validate, built once each."""
    build = Build(tables, settings or QualitySettings(), inputs)
    return {name: FRAMES[name](build) for name in dict.fromkeys(c.frame for c in checks)}
