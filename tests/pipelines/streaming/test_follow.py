"""``follow``: the job keeps running and picks up what is appended to the log (a grown active segment and a new
segment) without a restart."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from spark_support import assert_tables_match_model, step_offsets

from jbod_model.errors import InputError
from jbod_model.simulator.churn import ChurnSpec, churn_log
from jbod_model.simulator.output import append_to_segment, write_metadata_dir
from jbod_model.storage.files import METADATA_PARTITION_DIR, segment_file_name
from pipelines.lakehouse.tables import last_offset
from pipelines.streaming.job import RunSummary, run_job


@pytest.mark.slow
def test_follow_picks_up_appended_records(spark: SparkSession, tmp_path: Path) -> None:
    entries = churn_log(ChurnSpec(seed=21, operations=40))
    half = next(i for i, e in enumerate(entries) if i >= len(entries) // 2 and e.batch_base_offset == e.offset)
    node = write_metadata_dir(tmp_path / "in" / "node-1", entries[:half], cluster_id="live")
    tables = tmp_path / "tables"
    result: list[RunSummary] = []
    done = threading.Event()
    runner = threading.Thread(target=lambda: result.append(run_job(
        [tmp_path / "in"], tables, tmp_path / "checkpoint", spark=spark, follow=True, follow_interval="1 second",
        timeout_seconds=180, stop_when=done.is_set)))
    runner.start()

    def wait_for(offset: int) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if last_offset(tables, "live") >= offset:
                    return
            except InputError:
                pass
            time.sleep(0.5)
        raise AssertionError(f"the job did not reach offset {offset}")

    wait_for(entries[half - 1].offset)
    part = node / METADATA_PARTITION_DIR
    quarter = next(i for i, e in enumerate(entries) if i >= half + (len(entries) - half) // 2
                   and e.batch_base_offset == e.offset)
    append_to_segment(part / segment_file_name(0), entries[half:quarter])
    rolled = part / segment_file_name(entries[quarter].offset)
    rolled.touch()
    append_to_segment(rolled, entries[quarter:])
    wait_for(entries[-1].offset)
    done.set()
    runner.join(timeout=60)
    assert result and len(result[0].batches) >= 2
    assert_tables_match_model(tables, [node], "live", step_offsets(entries, limit=10))
