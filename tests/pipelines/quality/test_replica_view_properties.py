"""The ``replicas`` frame (I13) decides what a row says of its own directory once per distinct (broker, directory,
state, offline, reason) and each row's partition apart. Property: on replica rows edited at random — states,
reasons and directories unreadable or wrong, brokers that are no replica, rows written twice, a topic id that is
no id — each row's verdict and reason are what Kafka's rule (``replica_state_consistent``) says row by row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_quality_support import DEMO_CLUSTER, demo_lakehouse

from jbod_model.directory_id import LOST, MIGRATING, UNASSIGNED, DirectoryState
from jbod_model.errors import JbodError
from jbod_model.invariants import replica_is_offline, replica_state_consistent
from jbod_model.replicas import OfflineReason, ReplicaState
from jbod_model.uuid import Uuid
from pipelines.config.profiles import QualitySettings
from pipelines.quality.expectations import column_of
from pipelines.quality.frames import Build, Model
from pipelines.quality.inputs import ExternalInputs, TableSet
from pipelines.quality.suites import FRAMES

STATES = [s.value for s in DirectoryState] + ["BOGUS", None]
REASONS = [None, *(r.value for r in OfflineReason), "BOGUS"]
PLACEHOLDERS = [str(LOST), str(UNASSIGNED), str(MIGRATING), str(Uuid(0, 7)), "not-a-directory", None]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> TableSet:
    root = demo_lakehouse(tmp_path_factory.mktemp("view") / "tables")
    return TableSet(DEMO_CLUSTER, Path(root)).load_all(["features", "brokers", "partitions", "replica_assignments",
                                                         "records"])


def _row_by_rule(model: Model, partitions: dict[tuple[str, int], Any], row: Any,
                 second: bool) -> tuple[bool | None, str | None]:
    """The verdict on one row, the straightforward way: a ReplicaState per row, through the reference rule."""
    pk = (str(row.topic_id), int(row.partition_id))
    part = partitions.get(pk)
    if part is None and pk in partitions:
        return None, "the partition's directories are broken (I1)"
    if second:
        return False, "a second row for this replica"
    if part is None or int(row.broker_id) not in part.replicas:
        return False, "not a replica of any partition"
    directory = model.uuids.get(row.directory)
    try:
        state = ReplicaState(topic_id=Uuid.from_string(pk[0]), partition_id=pk[1], broker_id=int(row.broker_id),
                             directory=directory if directory is not None else Uuid(0, 0),
                             directory_state=DirectoryState(row.directory_state), offline=bool(row.offline),
                             offline_reason=None if row.offline_reason is None else OfflineReason(row.offline_reason))
    except (JbodError, ValueError):
        return False, "unreadable directory, state or reason"
    if directory is None:
        return False, "unreadable directory"
    if replica_state_consistent(model.cluster, part, state):
        return True, None
    return False, f"Kafka's rule says offline={replica_is_offline(model.cluster, state.broker_id, directory)}"


edits = st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(["directory", "directory_state", "offline",
                                                                     "offline_reason", "broker_id", "twice"]),
                           st.integers(0, 10_000)), max_size=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=edits, renamed=st.booleans())
def test_each_rows_verdict_is_the_rules_row_by_row(demo: TableSet, edits: list[tuple[int, str, int]],
                                                   renamed: bool) -> None:
    rows = demo.table("replica_assignments").reset_index(drop=True)
    partitions = demo.table("partitions")
    directories = sorted({d for d in rows["directory"] if d is not None})
    if renamed:
        # A topic id that is no id, in both tables: its partitions still form registrations (the model reads no
        # topic id), and their rows cannot be read as replica states.
        topic = rows["topic_id"].iloc[0]
        rows = rows.assign(topic_id=rows["topic_id"].replace(topic, "no-such-id"))
        partitions = partitions.assign(topic_id=partitions["topic_id"].replace(topic, "no-such-id"))
    extra = []
    for at, column, pick in edits:
        i = at % len(rows)
        if column == "twice":
            extra.append(rows.iloc[[i]])
        elif column == "directory":
            rows.at[i, column] = [*directories, *PLACEHOLDERS][pick % (len(directories) + len(PLACEHOLDERS))]
        elif column == "directory_state":
            rows.at[i, column] = STATES[pick % len(STATES)]
        elif column == "offline_reason":
            rows.at[i, column] = REASONS[pick % len(REASONS)]
        elif column == "offline":
            rows.at[i, column] = bool(pick % 2)
        else:
            rows.at[i, column] = [1, 2, 3, 99][pick % 4]
    edited = pd.concat([rows, *extra], ignore_index=True)
    build = Build(demo.with_tables(replica_assignments=edited, partitions=partitions), QualitySettings(),
                  ExternalInputs())
    frame = FRAMES["replicas"](build).data
    again = edited.duplicated(["topic_id", "partition_id", "broker_id"], keep="first").tolist()
    expected = [_row_by_rule(build.model, build.partitions, row, second)
                for row, second in zip(edited.itertuples(), again, strict=True)]
    view = column_of("I13.replica_view_matches")
    got = [(None if pd.isna(ok) else bool(ok), None if pd.isna(why) else why)
           for ok, why in zip(frame[view].iloc[:len(edited)], frame["why"].iloc[:len(edited)], strict=True)]
    assert got == expected
