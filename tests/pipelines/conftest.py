"""One Spark session for every Spark test (a session costs 10–25 s to start), and the model-side references the
tables are compared with."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from pipelines.streaming.session import spark_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A local[2] session with the job's settings (RocksDB state store, 2 shuffle partitions, loopback)."""
    session = spark_session("local[2]", {"spark.sql.shuffle.partitions": "2"}, app_name="kraft-jbod-tests")
    yield session
    session.stop()
