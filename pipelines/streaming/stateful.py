"""The stateful processor Spark runs (``transformWithStateInPandas``): the state it declares, and each bucket's batch
handed to :func:`pipelines.streaming.processor.replay_packets`.

Apart from the processor module because Spark also runs this class alone, in a Python process of its own on the
driver, before the first micro-batch (``transform_with_state_driver_worker``: it unpickles the processor and calls
``init`` for the state's schemas), and the query's start waits for that process. Unpickling it there imported the
processor module — pandas, pyarrow, the model —, about 0.5 s of that process's 1.1 s (docs/state-design.md,
"fourteenth round"). The workers import the processor module with their daemon (``daemon.PRELOAD``), so its import
in :meth:`ClusterReplayProcessor.handleInputRows` costs them nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql.streaming.stateful_processor import (
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
    ValueState,
)

from pipelines.streaming.batchfiles import task_folder

if TYPE_CHECKING:
    import pandas as pd

#: The operator's map states: name → (key schema, value schema), as ``getMapState`` declares them.
MAP_STATES: dict[str, tuple[str, str]] = {
    "features": ("name string", "level int"),
    "brokers": ("broker_id int", "reg string"),
    "topics": ("topic_id string", "name string, ranges string"),
    "topic_names": ("name string", "topic_id string"),
    # The two large values, compressed (codec.packed_state): state layout 9.
    "partitions": ("chunk int", "parts binary"),
    "broker_parts": ("broker_id int, bucket int", "keys binary"),
    "configs": ("resource_type int, resource_name string", "entries string"),
}
#: ``buckets``: the cluster's bucket count when the state was written; a run with another count is refused (a
#: partition's bucket would change under it).
_META_SCHEMA = "last_offset long, pending string, controller string, halted string, origin string, buckets int"


class ClusterReplayProcessor(StatefulProcessor):
    """``transformWithStateInPandas`` processor: one grouping key per (cluster, replay bucket) — see
    :mod:`pipelines.streaming.processor` and ``jbod_model.buckets``. A bucket's output rows are written as files
    under ``parts_dir/<batch id>`` (``pipelines.lakehouse.staging``, "Output files"), which every executor must
    reach at that path, as it reaches the checkpoint."""

    def __init__(self, buckets: int, parts_dir: str, bulk_read_rows: int | None = None) -> None:
        from jbod_model.buckets import check_buckets  # noqa: PLC0415 - on the job's driver only (module docstring)

        self._buckets = check_buckets(buckets)
        self._parts_dir = parts_dir
        self._bulk_read_rows = bulk_read_rows

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._meta: ValueState = handle.getValueState("meta", _META_SCHEMA)
        # The last range skipped under policy skip: a later fault may be its consequence (jbod_model.gaps).
        self._gap: ValueState = handle.getValueState("gap", "last string")
        self._maps = {name: handle.getMapState(name, key, value) for name, (key, value) in MAP_STATES.items()}

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame],
                        timerValues: TimerValues) -> Iterator[pd.DataFrame]:
        from pipelines.streaming.processor import replay_packets  # noqa: PLC0415 - see the module docstring

        # The grouping key of a bucket is chosen for its state partition (pipelines.streaming.placement); the bucket
        # is the key modulo the bucket count.
        cluster_id, bucket = str(key[0]), int(key[1]) % self._buckets
        # A packet comes inline (``rows``) or as the file the source wrote it to (``file``: pipelines.streaming.source).
        packets = [(int(s), p if f is None else Path(f).read_bytes()) for frame in rows
                   for s, p, f in zip(frame["seq"], frame["rows"], frame["file"], strict=True)]
        out = replay_packets(cluster_id, packets, self._meta, self._maps, bucket, self._buckets, self._gap,
                             directory=task_folder(self._parts_dir), bulk_read_rows=self._bulk_read_rows)
        if out is not None:
            yield out

    def close(self) -> None:
        pass
