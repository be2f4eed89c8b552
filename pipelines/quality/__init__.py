"""Data quality of the Delta tables: great-expectations suites for the KIP-858 invariants (``jbod check``) — where a
new check goes (``suites/``).

The invariants are operators-and-peers.md §4 (I1–I25). Their names, severities, rationales and sources come from
:mod:`jbod_model.invariants` (``INVARIANTS``, ``EXTERNAL_INVARIANTS``) — one source of truth — and every per-row rule
is one of that module's predicates, applied to a table row turned back into a model object. What this room adds is
the table side: which rows a rule looks at, table-level rules (uniqueness across rows, intervals over history,
thresholds) and the great-expectations plumbing.

How a check runs, per cluster:

1. :class:`~pipelines.quality.inputs.TableSet` reads the cluster's tables through their Delta logs (deltalake; never the
   parquet files).
2. *Frame builders* (each suite's, ``suites/``; what they share in ``frames``) turn them into flat DataFrames, one row
   per thing an expectation looks at (a partition, a replica, a broker's directory, a history version, a record, a
   pending placement …): key columns (always an ``offset`` — where to look in the log), and one boolean column per
   per-row rule, computed with the model's predicate (null = not applicable), or a number for threshold rules (an age in
   offsets or ms).
3. Each :class:`~pipelines.quality.expectations.Check` is one great-expectations expectation on one frame column —
   ``ExpectColumnValuesToBeInSet [True]`` for a predicate, ``ExpectColumnValuesToBeUnique`` for "a directory belongs to
   one broker", ``ExpectColumnValuesToBeBetween(max)`` for "pending for at most N offsets",
   ``ExpectColumnValuesToNotBeInSet`` on the rows the model's step checks or the replay reported. Its ``meta`` names the
   expectation, the invariant, the severity (``error``/``warning``), the rationale and the source; GX's own ``severity``
   is set to match (``critical``/``warning``).
4. Checks are grouped into suites — ``structural``, ``semantic``, ``history``, ``log``, ``external``
   (:data:`pipelines.config.profiles.SUITE_NAMES`) — and run as one GX suite per (suite, frame), on pandas or on Spark
   DataFrames (``engine``; ``gx``). Results become :class:`~pipelines.quality.results.CheckResult` rows (with a sample
   of the offending rows and their offsets), are appended to the ``dq_results`` Delta table and rendered as GX data
   docs.

Suites, one module each in ``suites/`` (docs/data-quality.md lists every expectation):

* ``structural`` — per-row rules on the current ``partitions`` and ``brokers`` (I1, I2, I4, I5), directory ids unique
  across brokers (I6), per-record rules on the bronze ``records`` (I3, I9), and the breaches replay refuses outright
  (a ``replay_faults`` row: I1, I6, I7, or another fault);
* ``semantic`` — the replica view and the offline intervals as Kafka computes them (I13), leaders (I14), ISR (I15),
  reassignment fields (I18);
* ``history`` — a directory owned by one broker at any offset (I6, ``broker_history``), registration changes only
  shrink (I8), carried-over registrations and pending placements resolve within a threshold (I9 warning, I12), a
  replica's directory was registered by its broker at some earlier offset (I21);
* ``log`` — the bronze records replayed through :class:`jbod_model.invariants.InvariantTracker`'s step checks, for the
  invariants that need a whole record batch (I10, I11, I16, I17, I19); I20 is skipped (it needs the snapshot files);
* ``external`` — I22 and I24 from a meta.properties inventory (``--dirs``) or broker configs (``--broker-config``);
  skipped, with the reason, without them; I23 (needs DescribeLogDirs) and I25 (needs cordon data, Kafka ≥ 4.3) are
  always skipped for now.

The §4.1 look-alikes are not expectations: a replica whose directory is missing from its broker's online list is
offline (I13), not corrupt — I21 asks only that the broker registered it at some time; UNASSIGNED on a multi-directory
broker is pending (I12 warns only past a threshold); the last ISR member on an offline directory is legal; an empty
LogDirs list is "no change" (change records) or "all online" (pre-3.7-IV2 registrations).

May import ``pipelines.lakehouse``, ``pipelines.config`` and ``jbod_model``; never the CLI, streaming, scheduling or
report rooms. Inside: ``runner`` → ``gx`` → ``suites`` | ``results`` → ``frames`` → ``expectations`` | ``inputs``
(import-linter keeps that order). The names below are the room's interface.
"""

from __future__ import annotations

from pipelines.quality.expectations import Check, Skip, column_of
from pipelines.quality.gx import GxRunner
from pipelines.quality.inputs import ExternalInputs, TableSet
from pipelines.quality.results import (
    RESULTS_TABLE,
    CheckResult,
    QualityRun,
    StoredRun,
    latest_run,
    read_results,
    write_results,
)
from pipelines.quality.runner import check_cluster, run_checks
from pipelines.quality.suites import CHECKS, FRAMES, SKIPS, build_frames, checks_for

__all__ = ["CHECKS", "FRAMES", "RESULTS_TABLE", "SKIPS", "Check", "CheckResult", "ExternalInputs", "GxRunner",
           "QualityRun", "Skip", "StoredRun", "TableSet", "build_frames", "check_cluster", "checks_for", "column_of",
           "latest_run", "read_results", "run_checks", "write_results"]
