"""Where Spark puts a state key: the grouping key values that spread one cluster's replay buckets over every state
partition.

The stateful operator is grouped by ``(cluster_id, key)``, and Spark places a group on state partition
``pmod(murmur3(cluster_id, key), spark.sql.shuffle.partitions)`` (``HashPartitioning``: Spark's Murmur3_x86_32
with seed 42, the string's UTF-8 bytes, then the key as a long). Numbering a cluster's buckets 0..B-1 left their
placement to that hash: on 2 partitions, 4 buckets split 3:1 or 4:0 for some cluster ids — one core doing most of a
cluster while the other idled. So each bucket ``b`` is keyed by the first ``b + k·B`` (k = 0, 1, …) that Spark places
on partition ``b mod P``: a cluster's buckets fill the partitions round-robin, and ``key mod B`` is the bucket again.
The partition count is fixed into the checkpoint (Spark's own rule), and so are the keys.
"""

from __future__ import annotations

from functools import lru_cache

#: Spark's ``Murmur3Hash`` seed (``HashPartitioning.partitionIdExpression``).
SPARK_HASH_SEED = 42
#: How many keys to try for a bucket before keeping its plain number (never reached: each try is a 1/P chance).
_MAX_TRIES = 10_000

_MASK = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK


def _mix_k1(k1: int) -> int:
    return (_rotl((k1 * 0xCC9E2D51) & _MASK, 15) * 0x1B873593) & _MASK


def _mix_h1(h1: int, k1: int) -> int:
    return (_rotl(h1 ^ k1, 13) * 5 + 0xE6546B64) & _MASK


def _fmix(h1: int, length: int) -> int:
    h1 ^= length
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _MASK
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _MASK
    return h1 ^ (h1 >> 16)


def _hash_bytes(data: bytes, seed: int) -> int:
    """``Murmur3_x86_32.hashUnsafeBytes``: 4-byte little-endian words, then each remaining byte (signed) mixed as a
    word of its own — Spark's variant, not the reference tail."""
    h1 = seed & _MASK
    aligned = len(data) - len(data) % 4
    for i in range(0, aligned, 4):
        h1 = _mix_h1(h1, _mix_k1(int.from_bytes(data[i:i + 4], "little")))
    for byte in data[aligned:]:
        h1 = _mix_h1(h1, _mix_k1((byte - 256 if byte > 127 else byte) & _MASK))
    return _fmix(h1, len(data))


def _hash_long(value: int, seed: int) -> int:
    """``Murmur3_x86_32.hashLong``: the low word, then the high word."""
    h1 = _mix_h1(seed & _MASK, _mix_k1(value & _MASK))
    h1 = _mix_h1(h1, _mix_k1((value >> 32) & _MASK))
    return _fmix(h1, 8)


def spark_hash(cluster_id: str, key: int) -> int:
    """Spark SQL's ``hash(cluster_id, key)`` for a string and a long: a signed 32-bit int."""
    h = _hash_long(key, _hash_bytes(cluster_id.encode("utf-8"), SPARK_HASH_SEED))
    return h - (1 << 32) if h >= 1 << 31 else h


def state_partition(cluster_id: str, key: int, partitions: int) -> int:
    """The state partition Spark puts the group ``(cluster_id, key)`` on."""
    return spark_hash(cluster_id, key) % partitions  # Python's % is pmod for a positive divisor


@lru_cache(maxsize=4096)
def bucket_keys(cluster_id: str, buckets: int, partitions: int) -> tuple[int, ...]:
    """The grouping key of each of a cluster's ``buckets`` replay buckets (see the module docstring); ``key %
    buckets`` is the bucket."""
    keys = []
    for bucket in range(buckets):
        target = bucket % partitions
        key = bucket
        for k in range(_MAX_TRIES):
            candidate = bucket + k * buckets
            if state_partition(cluster_id, candidate, partitions) == target:
                key = candidate
                break
        keys.append(key)
    return tuple(keys)
