"""The ``replica_directory_history`` frame (I21) decides each placement once per distinct (broker, directory, how
many directories the broker had listed by then) — a few thousand triples for millions of placements at 2 M
partitions. Property: on histories edited at random — a version's directory another broker's, a placeholder, no
id, none; its start moved; a broker's registration without one of its directories — the frame's rows are, one by
one, the placements a plain reading of the history finds, each judged by the model's rule
(``replica_directory_registered``) against what its broker had listed by its offset."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_quality_support import DEMO_CLUSTER, demo_lakehouse

from jbod_model.directory_id import LOST, MIGRATING, UNASSIGNED, is_reserved
from jbod_model.errors import JbodError
from jbod_model.invariants import replica_directory_registered
from jbod_model.uuid import Uuid
from pipelines.config.profiles import QualitySettings
from pipelines.quality.expectations import column_of
from pipelines.quality.frames import Build
from pipelines.quality.inputs import ExternalInputs, TableSet
from pipelines.quality.suites import FRAMES

VERDICT = column_of("I21.directory_registered_by_broker")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> TableSet:
    root = demo_lakehouse(tmp_path_factory.mktemp("i21") / "tables")
    return TableSet(DEMO_CLUSTER, Path(root)).load_all(["features", "brokers", "replica_assignment_history",
                                                         "broker_history", "records"])


def _uuid(text: Any) -> Uuid | None:
    try:
        return None if text is None else Uuid.from_string(str(text))
    except (JbodError, ValueError):
        return None


def _placements_by_hand(history: pd.DataFrame, brokers: pd.DataFrame) -> list[tuple[Any, ...]]:
    """Each version that sets its replica's directory — the key's first, or one whose directory differs from the
    previous version's or that does not start where the previous ended — unless a placeholder or no id, judged
    against the directories its broker had listed at or before its offset."""
    listed: dict[int, list[tuple[int, str]]] = {}
    for r in brokers.itertuples():
        for text in [] if r.log_dirs is None else list(r.log_dirs):
            listed.setdefault(int(r.broker_id), []).append((int(r.valid_from_offset), str(text)))
    out = []
    previous: dict[tuple[str, int, int], tuple[Any, Any]] = {}
    rows = sorted(history.itertuples(), key=lambda r: (str(r.topic_id), int(r.partition_id), int(r.broker_id),
                                                       int(r.valid_from_offset)))
    for r in rows:
        key = (str(r.topic_id), int(r.partition_id), int(r.broker_id))
        directory = None if pd.isna(r.directory) else str(r.directory)
        before = previous.get(key)
        previous[key] = (directory, None if pd.isna(r.valid_to_offset) else int(r.valid_to_offset))
        if before is not None and before[0] == directory and directory is not None \
                and before[1] == int(r.valid_from_offset):
            continue  # the same directory carried over: no placement
        d = _uuid(directory)
        if d is None or is_reserved(d):
            continue
        at = int(r.valid_from_offset)
        ever = {x for offset, text in listed.get(key[2], []) if offset <= at and (x := _uuid(text)) is not None}
        ok = replica_directory_registered(d, ever)
        others = sorted({b for b, pairs in listed.items() for _, text in pairs if text == directory} - {key[2]})
        why = None if ok else (f"only broker(s) {others} registered it" if others else "no broker registered it")
        out.append((*key[:1], str(r.topic_name), key[1], key[2], directory, at, ok, why))
    return out


edits = st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(["directory", "start", "unlist"]),
                           st.integers(0, 10_000)), max_size=10)


def _frame_and_by_hand(demo: TableSet, edits: list[tuple[int, str, int]],
                       history: pd.DataFrame | None = None) -> tuple[list[Any], list[Any]]:
    history = (demo.table("replica_assignment_history") if history is None else history).copy().reset_index(drop=True)
    brokers = demo.table("broker_history").copy().reset_index(drop=True)
    known = sorted({str(d) for cell in brokers["log_dirs"] if cell is not None for d in cell})
    choices = [*known, str(LOST), str(UNASSIGNED), str(MIGRATING), "not-a-directory", None]
    for where, what, pick in edits:
        if what == "unlist":
            i = where % len(brokers)
            dirs = list(brokers.at[i, "log_dirs"])
            if dirs:
                brokers.at[i, "log_dirs"] = [d for j, d in enumerate(dirs) if j != pick % len(dirs)]
            continue
        i = where % len(history)
        if what == "directory":
            history.at[i, "directory"] = choices[pick % len(choices)]
        else:
            history.at[i, "valid_from_offset"] = pick % 40
    build = Build(demo.with_tables(replica_assignment_history=history, broker_history=brokers), QualitySettings(),
                  ExternalInputs())
    frame = FRAMES["replica_directory_history"](build).data
    got = [(r.topic_id, r.topic_name, int(r.partition_id), int(r.broker_id), r.directory, int(r.offset),
            bool(getattr(r, VERDICT)), None if pd.isna(r.why) else r.why) for r in frame.itertuples()]
    return sorted(got, key=repr), sorted(_placements_by_hand(history, brokers), key=repr)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=edits)
def test_each_placements_verdict_is_the_rules_against_its_brokers_listings_then(
        demo: TableSet, edits: list[tuple[int, str, int]]) -> None:
    got, by_hand = _frame_and_by_hand(demo, edits)
    assert got == by_hand


def test_a_directory_another_broker_listed_and_one_its_broker_dropped_are_judged(demo: TableSet) -> None:
    """Not vacuous: the edits above make placements their broker never listed (here every version on one broker's
    first directory: registered for that broker's replicas, another broker's for the rest), and a broker's
    registrations without their directories leave nobody who listed it."""
    got, by_hand = _frame_and_by_hand(demo, [(i, "directory", 0) for i in range(40)])
    assert got == by_hand
    reasons = {row[7] for row in got}
    assert None in reasons and any(str(r).startswith("only broker(s) [") for r in reasons)
    got, by_hand = _frame_and_by_hand(demo, [(i, "directory", 0) for i in range(40)]
                                      + [(i, "unlist", 0) for i in range(7)] * 3)
    assert got == by_hand
    assert "no broker registered it" in {row[7] for row in got}


def test_a_placement_at_the_offset_its_broker_first_lists_the_directory_is_registered(demo: TableSet) -> None:
    """"At that offset or earlier": a placement at the very offset of the registration that first lists its
    directory is judged registered."""
    brokers = demo.table("broker_history")
    history = demo.table("replica_assignment_history")
    first = {(int(r.broker_id), str(d)): int(r.valid_from_offset)
             for r in brokers.sort_values("valid_from_offset", ascending=False).itertuples() for d in r.log_dirs}
    i = next(i for i, r in enumerate(history.itertuples()) if (int(r.broker_id), str(r.directory)) in first)
    at = first[(int(history["broker_id"].iloc[i]), str(history["directory"].iloc[i]))]
    got, by_hand = _frame_and_by_hand(demo, [(i, "start", at)])
    assert got == by_hand
    row = next(row for row in got if row[3] == int(history["broker_id"].iloc[i]) and row[5] == at)
    assert row[6] is True


def test_a_replicas_first_version_is_a_placement_whatever_the_version_before_it_in_key_order(demo: TableSet) -> None:
    """A replica's first version sets its directory even where the row before it in key order — another replica's
    last version — ended where it starts, in the same directory."""
    key = ["topic_id", "partition_id", "broker_id"]
    history = demo.table("replica_assignment_history").sort_values([*key, "valid_from_offset"]).reset_index(drop=True)
    firsts = history.index[(history[key] != history[key].shift()).any(axis=1)].tolist()[1:]
    first = firsts[0]
    real = next(t for t in history["directory"] if (d := _uuid(t)) is not None and not is_reserved(d))
    history.at[first - 1, "directory"] = history.at[first, "directory"] = real
    history.at[first - 1, "valid_to_offset"] = history.at[first, "valid_from_offset"]
    got, by_hand = _frame_and_by_hand(demo, [], history)
    assert got == by_hand
    placed = history.loc[first]
    assert (str(placed["topic_id"]), int(placed["partition_id"]), int(placed["broker_id"]),
            int(placed["valid_from_offset"])) in {(row[0], row[2], row[3], row[5]) for row in got}
