"""What an expectation is: :class:`Check` (a rule on one column of one frame, in one suite, for one invariant)
and :class:`Skip` (an invariant a suite cannot check yet), and the constructors the suites declare theirs with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jbod_model import invariants as inv
from pipelines.config.profiles import QualitySettings


@dataclass(frozen=True, slots=True)
class Check:
    """One expectation: a rule on one column of one frame, in one suite, for one invariant (or part of it).

    ``rule``: ``true`` (every non-null value is True: a predicate held), ``unique`` (no value twice), ``at_most``
    (no value above the ``threshold`` setting of :class:`~pipelines.config.profiles.QualitySettings`), ``not_in``
    (no value equal to ``value``: a row the model or the replay reported)."""

    name: str
    suite: str
    frame: str
    column: str
    rule: str
    invariant: str | None
    summary: str
    value: str | None = None
    threshold: str | None = None
    #: Overrides the invariant's own severity (I9's carried-over registration is a warning).
    severity: str | None = None

    @property
    def definition(self) -> inv.Invariant | None:
        return None if self.invariant is None else inv.invariant(self.invariant)

    @property
    def severity_name(self) -> str:
        if self.severity is not None:
            return self.severity
        definition = self.definition
        return "error" if definition is None else definition.severity.value.lower()

    @property
    def rationale(self) -> str:
        definition = self.definition
        if definition is None:
            return ("The job stopped replaying this cluster at a record it cannot apply: nothing after it is in "
                    "the tables, so no other expectation covers it.")
        return definition.rationale

    def meta(self, settings: QualitySettings) -> dict[str, Any]:
        definition = self.definition
        out: dict[str, Any] = {"expectation": self.name, "suite": self.suite, "invariant": self.invariant,
                               "severity": self.severity_name, "rationale": self.rationale, "checks": self.summary,
                               "title": None if definition is None else definition.title,
                               "source": None if definition is None else definition.source}
        if self.threshold is not None:
            out["threshold"] = {self.threshold: getattr(settings, self.threshold)}
        return out


@dataclass(frozen=True, slots=True)
class Skip:
    """An invariant a suite cannot check (yet), with the reason, reported as a ``skipped`` result."""

    name: str
    suite: str
    invariant: str
    reason: str


def column_of(name: str) -> str:
    """The frame column a predicate expectation reads: its name, readable in the data docs (no dots: Spark)."""
    return name.replace(".", "_")


def expect_true(name: str, suite: str, frame: str, invariant: str, summary: str) -> Check:
    return Check(name, suite, frame, column_of(name), "true", invariant, summary)


def expect_not_in(name: str, suite: str, frame: str, column: str, value: str, invariant: str | None,
            summary: str) -> Check:
    return Check(name, suite, frame, column, "not_in", invariant, summary, value=value)


def expect_at_most(name: str, suite: str, frame: str, column: str, threshold: str, invariant: str, summary: str,
             severity: str | None = None) -> Check:
    return Check(name, suite, frame, column, "at_most", invariant, summary, threshold=threshold, severity=severity)
