"""Where a micro-batch's tasks put the rows they hand on as files: the source's input rows for the operator, the
operator's output rows for the driver — under the checkpoint's ``staged/parts/<batch id>``
(``pipelines.lakehouse.staging``, "Output files"). Only the files' names go through Spark."""

from __future__ import annotations

import os

from pyspark import TaskContext

#: The local property Spark's micro-batch execution sets on every task of a batch: the batch id.
BATCH_ID_PROPERTY = "streaming.sql.batchId"


def task_folder(parts_root: str) -> str:
    """The folder of this task's files: its micro-batch's under ``parts_root``; outside a streaming batch (no batch
    id: a test's direct call) a folder of its own."""
    context = TaskContext.get()
    batch_id = context.getLocalProperty(BATCH_ID_PROPERTY) if context is not None else None
    return os.path.join(parts_root, batch_id if batch_id is not None else "unbatched")
