"""Where Spark puts the operator's groups (``pipelines.streaming.placement``): our Murmur3 is Spark's, and a
cluster's replay buckets land on every state partition."""

from __future__ import annotations

import random

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from pipelines.streaming.codec import InputRow
from pipelines.streaming.placement import bucket_keys, spark_hash, state_partition
from pipelines.streaming.source import input_schema

CLUSTER_IDS = ["", "a", "ab", "abc", "abcd", "p200011-b60x6-rf3-o136000-s2024-g2", "MkU3OEVBNTcwNTJENDM2Qk",
               "kraft-cluster-é", "集群-1"]


@pytest.mark.parametrize("buckets", [1, 2, 3, 4, 7, 16])
@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
def test_a_clusters_buckets_fill_the_partitions_round_robin(buckets: int, partitions: int) -> None:
    for cluster_id in CLUSTER_IDS:
        keys = bucket_keys(cluster_id, buckets, partitions)
        assert [k % buckets for k in keys] == list(range(buckets))
        assert [state_partition(cluster_id, k, partitions) for k in keys] == \
            [b % partitions for b in range(buckets)]


def test_the_bucket_column_is_a_long() -> None:
    # spark_hash hashes the key as a long (Murmur3 hashLong): the column the operator groups by must be one.
    field = input_schema()["bucket"]
    assert isinstance(field.dataType, LongType)
    assert "bucket" in InputRow.__dataclass_fields__


def test_our_hash_and_partition_are_sparks(spark: SparkSession) -> None:
    rng = random.Random(7)
    rows = [(c, k) for c in CLUSTER_IDS for k in [0, 1, 2, 3, -1, 2**31, -(2**40), *rng.sample(range(10**6), 8)]]
    schema = StructType([StructField("cluster_id", StringType()), StructField("bucket", LongType())])
    got = spark.createDataFrame(rows, schema).select(
        "cluster_id", "bucket", F.hash("cluster_id", "bucket").alias("h"),
        F.expr("pmod(hash(cluster_id, bucket), 3)").alias("p")).collect()
    for row in got:
        assert spark_hash(row["cluster_id"], row["bucket"]) == row["h"], (row["cluster_id"], row["bucket"])
        assert state_partition(row["cluster_id"], row["bucket"], 3) == row["p"]
    assert all(isinstance(spark_hash(c, k), int) for c, k in rows)
