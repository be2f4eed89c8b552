"""Bad input in ``jbod run`` is handled as ``jbod report`` handles it (issue #15): the Spark job reads with the same
readers, keeps what they keep under ``--policy skip`` and records what they skip in ``log_gaps``."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from spark_support import assert_same_image

from jbod_model.errors import DecodeError
from jbod_model.image_json import image_to_json
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import TopicRecord
from jbod_model.replay import replay_entries
from jbod_model.simulator.churn import ChurnSpec, churn_log
from jbod_model.simulator.output import corrupt_batch, write_jsonl_file, write_metadata_dir
from jbod_model.sources import open_inputs
from jbod_model.storage.files import METADATA_PARTITION_DIR
from pipelines.lakehouse.tables import as_of_image, read_table
from pipelines.streaming.job import run_job

ENTRIES = churn_log(ChurnSpec(seed=5, operations=20))


def test_a_bad_jsonl_line_is_a_log_gap_under_skip_and_the_report_error_under_fail(spark: SparkSession,
                                                                                  tmp_path: Path) -> None:
    path = write_jsonl_file(tmp_path / "in" / "c.jsonl", ENTRIES)
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[6] = lines[6][:40] + "\t\x01" + lines[6][40:]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    run_job([path], tmp_path / "skip", spark=spark, policy="skip")
    loaded = open_inputs([path], policy="skip")
    kept = [e.offset for e in loaded.entries if isinstance(e, LogEntry)]
    assert sorted(r["offset"] for r in read_table(tmp_path / "skip", "records").to_pylist()) == kept
    [gap] = read_table(tmp_path / "skip", "log_gaps").to_pylist()
    [skipped] = loaded.report.skipped
    assert gap["first_missing_offset"] is None and gap["message"].startswith(str(skipped))

    with pytest.raises(DecodeError) as failed:
        run_job([path], tmp_path / "fail", spark=spark, policy="fail")
    with pytest.raises(DecodeError) as reported:
        list(open_inputs([path]).entries)
    assert str(failed.value).startswith(str(reported.value))


def test_a_run_without_follow_says_what_it_left_unread_at_a_torn_tail(spark: SparkSession, tmp_path: Path) -> None:
    node = write_metadata_dir(tmp_path / "in" / "n", ENTRIES, cluster_id="c")
    [segment] = (node / METADATA_PARTITION_DIR).glob("*.log")
    data = segment.read_bytes()
    segment.write_bytes(data + data[-38:])  # 38 bytes of a batch being written (or cut short)

    run_job([node], tmp_path / "skip", spark=spark, policy="skip", max_entries_per_batch=7)
    assert sorted(r["offset"] for r in read_table(tmp_path / "skip", "records").to_pylist()) == \
        [e.offset for e in ENTRIES]
    [gap] = read_table(tmp_path / "skip", "log_gaps").to_pylist()
    assert (gap["first_missing_offset"], gap["last_missing_offset"]) == (len(ENTRIES), None)
    assert f"{segment}: skipped 38 byte(s) at byte {len(data)}" in gap["message"]

    with pytest.raises(DecodeError) as failed:
        run_job([node], tmp_path / "fail", spark=spark, policy="fail")
    with pytest.raises(DecodeError) as reported:
        list(open_inputs([node]).entries)
    assert str(failed.value).startswith(str(reported.value))


def test_a_record_that_needs_a_skipped_batch_is_a_consequence_in_log_gaps_and_the_run_goes_on(
        spark: SparkSession, tmp_path: Path) -> None:
    """As ``jbod image --policy skip``: the PartitionRecords of a topic whose TopicRecord batch is corrupt are left
    out (rows of ``log_gaps`` with one dropped record each, across micro-batches), nothing halts the cluster, and
    every other record is replayed."""
    node = write_metadata_dir(tmp_path / "in" / "n", ENTRIES, cluster_id="c")
    topic = next(e for e in ENTRIES if isinstance(e.record, TopicRecord))
    _segment, first, last = corrupt_batch(node, topic.offset)

    run_job([node], tmp_path / "t", spark=spark, policy="skip", max_entries_per_batch=3)
    assert not read_table(tmp_path / "t", "replay_faults").to_pylist()
    gaps = read_table(tmp_path / "t", "log_gaps").to_pylist()
    consequences = [g for g in gaps if g["dropped_records"] == 1]
    assert [g["first_missing_offset"] for g in gaps if g["dropped_records"] == 0] == [first]
    assert consequences and all(f"Can't find topic with ID {topic.record.topic_id}" in g["message"]  # type: ignore[attr-defined]
                                for g in consequences)
    loaded = open_inputs([node], policy="skip")
    with loaded.replaying():
        image = replay_entries(e for e in loaded.entries if isinstance(e, LogEntry))
    assert {c.offset for c in loaded.consequences.consequences} == {g["first_missing_offset"] for g in consequences}
    assert_same_image(as_of_image(tmp_path / "t", "c"), image_to_json(image), "latest")
    assert last >= first
