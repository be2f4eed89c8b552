"""Decode throughput of the metadata log reader on a large generated log (a benchmark, not a test).

Generates a segment shaped like a real one with our own writer — mostly one-record NoOp batches (the active
controller appends one every 500 ms), plus topic/partition/partition-change/broker batches — then measures:

* end to end: ``read_log_entries`` (the API replay uses), records/s and MB/s, best of two passes;
* the stages of decoding, each pass adding one stage so the differences are that stage's cost, with the record
  memos disabled so every record is really decoded: walking batches (file reads, header unpack, CRC-32C),
  record framing (``DefaultRecord`` varints), message decoding (frame + generated-code equivalent);
* peak RSS, to show that memory does not grow with the file.

Run: ``python benchmarks/decode_benchmark.py [--records 1500000] [--dir DIR] [--keep]``.
"""

from __future__ import annotations

import argparse
import gc
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from jbod_model.records.binary import decode_record
from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import (
    BrokerRegistrationChangeRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    TopicRecord,
)
from jbod_model.storage import log_reader
from jbod_model.storage.log_reader import ReadReport, read_log_entries
from jbod_model.storage.log_writer import SegmentWriter, encode_leader_change_batch
from jbod_model.uuid import Uuid

EPOCH = 5
START_TS = 1_700_000_000_000
DIRS = (Uuid(0x1111, 0x2222), Uuid(0x3333, 0x4444), Uuid(0x5555, 0x6666))


def generate(path: Path, records: int, *, noop_share: float = 0.95) -> tuple[int, int]:
    """Write ``records`` records to ``path``; returns (records written, batches written)."""
    batches = 1
    with SegmentWriter(path) as writer:
        writer.append_raw(encode_leader_change_batch(base_offset=0, leader_epoch=EPOCH, timestamp=START_TS,
                                                     leader_id=1, voters=[1, 2, 3]), next_offset=1)
        offset, topic = 1, 0
        every = max(int(1 / (1 - noop_share)), 2)
        while offset <= records:
            ts = START_TS + offset * 500
            if offset % every:
                writer.append_batch([LogEntry(offset, NoOpRecord(), leader_epoch=EPOCH, timestamp=ts)])
                offset += 1
            else:
                group = list(_metadata_group(topic))
                writer.append_batch([LogEntry(offset + i, r, leader_epoch=EPOCH, timestamp=ts)
                                     for i, r in enumerate(group)])
                offset += len(group)
                topic += 1
            batches += 1
    return offset - 1, batches


def _metadata_group(n: int) -> Iterator[Record]:
    """What a topic creation / leader move / broker heartbeat change looks like in the log."""
    topic_id = Uuid(n + 1, n * 7919 + 1)
    kind = n % 3
    if kind == 0:
        yield TopicRecord(name=f"topic-{n}", topic_id=topic_id)
        for p in range(3):
            yield PartitionRecord(partition_id=p, topic_id=topic_id, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1,
                                  leader_epoch=0, partition_epoch=0, directories=DIRS)
    elif kind == 1:
        yield PartitionChangeRecord(partition_id=n % 3, topic_id=topic_id, isr=(1, 2), leader=2)
    else:
        yield BrokerRegistrationChangeRecord(version=1, broker_id=n % 3 + 1, broker_epoch=n, fenced=-1)
        yield RegisterBrokerRecord(broker_id=4, incarnation_id=topic_id, broker_epoch=n, log_dirs=DIRS[:1],
                                   fenced=False)


def _timed(fn: Callable[[], int]) -> tuple[float, int]:
    start = time.perf_counter()
    count = fn()
    return time.perf_counter() - start, count


def _walk_only(path: Path) -> int:
    n = 0
    for _ in log_reader._walk(path, str(path), "fail", ReadReport(), verify_crc=True,
                              max_batch_bytes=log_reader.DEFAULT_MAX_BATCH_BYTES,
                              chunk_size=log_reader.DEFAULT_CHUNK_SIZE):
        n += 1
    return n


def _walk_and_frame(path: Path) -> int:
    n = 0
    for header, _fpos, _ok, buf, start, end in log_reader._walk(
            path, str(path), "fail", ReadReport(), verify_crc=True,
            max_batch_bytes=log_reader.DEFAULT_MAX_BATCH_BYTES, chunk_size=log_reader.DEFAULT_CHUNK_SIZE):
        n += len(log_reader._parse_records(buf, start + 61, end, header[12], bool(header[5] & 0x20)))
    return n


def _walk_frame_decode(path: Path) -> int:
    n = 0
    for header, _fpos, _ok, buf, start, end in log_reader._walk(
            path, str(path), "fail", ReadReport(), verify_crc=True,
            max_batch_bytes=log_reader.DEFAULT_MAX_BATCH_BYTES, chunk_size=log_reader.DEFAULT_CHUNK_SIZE):
        is_control = bool(header[5] & 0x20)
        for _od, _key, value, _pos in log_reader._parse_records(buf, start + 61, end, header[12], is_control):
            if not is_control:
                decode_record(value, use_cache=False)
            n += 1
    return n


def _end_to_end(path: Path) -> int:
    n = 0
    for _ in read_log_entries(path):
        n += 1
    return n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_500_000)
    parser.add_argument("--dir", type=Path, default=None, help="where to write the log (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the generated log")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        directory = args.dir or Path(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / "00000000000000000000.log"
        gen_s, (written, batches) = _timed_gen(path, args.records)
        size_mb = path.stat().st_size / 1e6
        print(f"generated {written:,} records in {batches:,} batches, {size_mb:.1f} MB, in {gen_s:.1f} s "
              f"({written / gen_s:,.0f} records/s written)")

        gc.collect()  # start the measurements from a clean heap, not from the writer's garbage
        e2e_s, entries = min(_timed(lambda: _end_to_end(path)) for _ in range(2))
        print(f"\nend to end, read_log_entries: {entries:,} metadata records in {e2e_s:.2f} s = "
              f"{entries / e2e_s:,.0f} records/s, {size_mb / e2e_s:.1f} MB/s")

        walk_s, _ = _timed(lambda: _walk_only(path))
        frame_s, framed = _timed(lambda: _walk_and_frame(path))
        full_s, _ = _timed(lambda: _walk_frame_decode(path))
        stages = {
            "batch header + CRC-32C (incl. file reads)": walk_s,
            "record framing (DefaultRecord varints)": max(frame_s - walk_s, 0.0),
            "message decode (frame + body, no memo)": max(full_s - frame_s, 0.0),
        }
        print(f"\nstages, memos off ({framed:,} records incl. control, {full_s:.2f} s = "
              f"{framed / full_s:,.0f} records/s, {size_mb / full_s:.1f} MB/s):")
        for name, seconds in stages.items():
            print(f"  {name:<45} {seconds:6.2f} s  {100 * seconds / full_s:5.1f} %")
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"\npeak RSS {peak:.0f} MB (file {size_mb:.0f} MB; reading streams through a 4 MiB window)")
        if args.keep and args.dir is not None:
            print(f"kept {path}")
    return 0


def _timed_gen(path: Path, records: int) -> tuple[float, tuple[int, int]]:
    start = time.perf_counter()
    result = generate(path, records)
    return time.perf_counter() - start, result


if __name__ == "__main__":
    sys.exit(main())
