"""What a simulation leaves behind, in memory (:class:`SimulationResult`) and on disk (:class:`OutputWriter`).

On disk, under the output directory::

    stream.jsonl                       requests and the records committed outside requests, in order
                                       (jbod_model.stream format: replaying it through StreamRunner rebuilds the image)
    records.jsonl                      the metadata log as JSONL records (offset, timestamp, leaderEpoch,
                                       batchBaseOffset)
    metadata/__cluster_metadata-0/     the metadata log as KRaft writes it: <base>.log segments, rolled at
        00000000000000000000.log       ``segment_bytes``, a LEADER_CHANGE control batch first, one batch per
        …                              controller write (leader epoch, timestamp from the simulated clock), and a
        <end>-<epoch>.checkpoint       snapshot of the final image
    broker-<id>/<dir>/meta.properties  one per simulated disk (node.id, cluster.id, directory.id)
    timeline.jsonl                     the ground-truth offline intervals
    happenings.jsonl                   the narrative (disk failures, halts, moves …)
    directories.json                   every simulated disk, including replaced and removed ones
    summary.json                       scenario, seed, counts, file list

Records reach the writer as the simulation commits them (:class:`SimulationSink`), so a large run streams
straight to disk (:class:`OutputWriter` as the sink) and keeps no record in memory; a small run collects them
(:class:`MemorySink`) and :func:`write_result` writes the same files afterwards.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TextIO

from jbod_model.image import MetadataImage
from jbod_model.invariants import Violation
from jbod_model.meta_properties import MetaProperties, MetaPropertiesVersion, to_text
from jbod_model.metadata_version import FEATURE_NAME
from jbod_model.records.entry import LogEntry, group_batches
from jbod_model.records.metadata import ConfigRecord, FeatureLevelRecord, Record, TopicRecord
from jbod_model.replay import replay_entries
from jbod_model.simulator.checks import PropertyViolation
from jbod_model.simulator.config import SimulationConfig
from jbod_model.simulator.history import DirectoryInfo, Happening
from jbod_model.simulator.truth import OfflineInterval
from jbod_model.storage.files import METADATA_PARTITION_DIR, SnapshotId, segment_file_name
from jbod_model.storage.log_reader import iter_batches
from jbod_model.storage.log_writer import (
    SegmentWriter,
    encode_batch,
    encode_leader_change_batch,
    snapshot_path,
    write_snapshot,
)
from jbod_model.stream import RequestEntry, StreamEntry, entry_to_line, write_jsonl

#: Kafka's ``metadata.log.segment.bytes`` is 1 GiB; simulations roll much earlier so small runs show rolled segments.
DEFAULT_SEGMENT_BYTES = 64 * 1024
#: The directory (under the output dir) holding ``__cluster_metadata-0``.
METADATA_LOG_DIR = "metadata"


class SimulationSink(Protocol):
    """Receives, in order, every request the controller handled and every batch it committed."""

    def on_request(self, entry: RequestEntry) -> None: ...

    def on_batch(self, entries: Sequence[LogEntry], *, outside: bool) -> None: ...


@dataclass
class MemorySink:
    """Keeps everything: ``stream`` (requests + records committed outside requests) and ``log`` (every record)."""

    stream: list[StreamEntry] = field(default_factory=list)
    log: list[LogEntry] = field(default_factory=list)

    def on_request(self, entry: RequestEntry) -> None:
        self.stream.append(entry)

    def on_batch(self, entries: Sequence[LogEntry], *, outside: bool) -> None:
        self.log.extend(entries)
        if outside:
            self.stream.extend(entries)


@dataclass(frozen=True, slots=True)
class SimulationStats:
    """Counts over a run."""

    requests: dict[str, int]
    records: dict[str, int]
    batches: int
    last_offset: int
    events: int


@dataclass(frozen=True, slots=True)
class SimulationResult:
    """A finished (or paused) run. ``stream`` and ``log`` are None when they were streamed to files instead of
    kept (see :class:`OutputWriter`). ``violations`` are the TLA+ property and invariant findings of the run's
    monitor plus, when the run ended quiescent, the end-of-run checks (``jbod_model.simulator.checks``);
    ``invariant_violations`` are the named invariants' findings (``jbod_model.invariants``) after every write."""

    name: str
    description: str
    seed: int
    config: SimulationConfig
    cluster_id: str
    image: MetadataImage
    end_time_ms: int
    quiescent: bool
    stream: tuple[StreamEntry, ...] | None
    log: tuple[LogEntry, ...] | None
    timeline: tuple[OfflineInterval, ...]
    directories: tuple[DirectoryInfo, ...]
    happenings: tuple[Happening, ...]
    violations: tuple[PropertyViolation, ...]
    invariant_violations: tuple[Violation, ...]
    stats: SimulationStats


@dataclass(frozen=True, slots=True)
class OutputPaths:
    """Where :class:`OutputWriter` put things."""

    root: Path
    metadata_dir: Path
    segments: tuple[Path, ...]
    snapshot: Path | None
    stream: Path
    records: Path
    timeline: Path
    happenings: Path
    directories: Path
    summary: Path
    meta_properties: tuple[Path, ...]


class _PartFile:
    """A file written as ``<name>.part`` and renamed into place when complete (as the storage writers do), so a
    reader never sees half a segment under its final name."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._part = path.with_name(path.name + ".part")
        self._file = self._part.open("wb")
        self.size = 0

    def write(self, data: bytes) -> None:
        self._file.write(data)
        self.size += len(data)

    def commit(self) -> None:
        self._file.close()
        self._part.replace(self.path)


class SegmentRoller:
    """Writes the metadata log as rolled ``.log`` segments (``KafkaMetadataLog`` / ``LogSegment``): a new segment
    starts at a batch boundary once the current one holds ``segment_bytes`` or more. The first batch of the log
    is the LEADER_CHANGE control batch the quorum leader writes at offset 0 of its epoch."""

    def __init__(self, partition_dir: Path, *, segment_bytes: int, leader_epoch: int, leader_id: int,
                 timestamp_ms: int) -> None:
        self._dir = partition_dir
        self._segment_bytes = max(segment_bytes, 1)
        self._current: _PartFile | None = None
        self.segments: list[Path] = []
        self.bytes_written = 0
        self.last_timestamp = timestamp_ms
        self.last_epoch = leader_epoch
        self.next_offset = 0
        self._write(encode_leader_change_batch(base_offset=0, leader_epoch=leader_epoch, timestamp=timestamp_ms,
                                               leader_id=leader_id, voters=[leader_id]), base_offset=0, count=1)

    def append(self, entries: Sequence[LogEntry]) -> None:
        """Append one batch (consecutive offsets, one epoch and timestamp)."""
        if not entries:
            return
        first = entries[0]
        if first.offset != self.next_offset:
            raise ValueError(f"the metadata log must be contiguous: batch at {first.offset}, expected "
                             f"{self.next_offset}")
        self._write(encode_batch(entries), base_offset=first.offset, count=len(entries))
        self.last_timestamp = first.timestamp if first.timestamp is not None else self.last_timestamp
        self.last_epoch = first.leader_epoch if first.leader_epoch is not None else self.last_epoch

    def _write(self, batch: bytes, *, base_offset: int, count: int) -> None:
        if self._current is not None and self._current.size >= self._segment_bytes:
            self._current.commit()
            self._current = None
        if self._current is None:
            path = self._dir / segment_file_name(base_offset)
            self._current = _PartFile(path)
            self.segments.append(path)
        self._current.write(batch)
        self.bytes_written += len(batch)
        self.next_offset = base_offset + count

    def close(self) -> None:
        if self._current is not None:
            self._current.commit()
            self._current = None


def snapshot_records(image: MetadataImage) -> Iterator[Record]:
    """The records of ``image`` in ``MetadataImage.to_records`` order, generated one at a time so a snapshot of a
    large image is written without listing them all: features (metadata.version first), brokers, each topic with
    its partitions, configs."""
    mv = image.metadata_version
    levels = image.features.levels
    for name in sorted(levels, key=lambda n: (n != FEATURE_NAME, n)):
        yield FeatureLevelRecord(name=name, feature_level=levels[name])
    for broker_id in sorted(image.cluster.brokers):
        yield image.cluster.brokers[broker_id].to_record(mv)
    for topic in sorted(image.topics.by_id.values(), key=lambda t: t.name):
        yield TopicRecord(name=topic.name, topic_id=topic.id)
        for pid in sorted(topic.partitions):
            yield topic.partitions[pid].to_record(topic.id, pid, mv)
    for rtype, rname in sorted(image.configs.resources):
        for key, value in sorted(image.configs.resources[(rtype, rname)].items()):
            yield ConfigRecord(resource_type=rtype, resource_name=rname, name=key, value=value)


#: What a previous run left in an output directory (removed before writing a new run there).
_OUTPUT_NAMES = ("stream.jsonl", "records.jsonl", "timeline.jsonl", "happenings.jsonl", "directories.json",
                 "summary.json")


def prepare_output_dir(root: str | Path) -> Path:
    """Make ``root`` ready for a run: create it, or empty it of a previous run's outputs. A non-empty directory
    that holds no previous run (no summary.json) is refused rather than mixed with."""
    path = Path(root)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{path} exists and is not a directory")
    path.mkdir(parents=True, exist_ok=True)
    entries = list(path.iterdir())
    if not entries:
        return path
    if not (path / "summary.json").is_file():
        raise ValueError(f"{path} is not empty and holds no previous simulation; choose an empty directory")
    for entry in entries:
        if entry.name in _OUTPUT_NAMES:
            entry.unlink()
        elif entry.is_dir() and (entry.name == METADATA_LOG_DIR or entry.name.startswith("broker-")):
            shutil.rmtree(entry)
    return path


def _write_json(path: Path, obj: Any) -> Path:
    path.write_text(json.dumps(obj, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    return path


class OutputWriter:
    """Writes a run's files (see the module docstring). Use it as the simulation's sink to stream a large run, or
    through :func:`write_result` for a run kept in memory. :meth:`finish` writes what needs the end state."""

    def __init__(self, root: str | Path, config: SimulationConfig, *, segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                 write_records_jsonl: bool = True) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.metadata_dir = self.root / METADATA_LOG_DIR
        partition_dir = self.metadata_dir / METADATA_PARTITION_DIR
        partition_dir.mkdir(parents=True, exist_ok=True)
        for stale in list(partition_dir.glob("*.log")) + list(partition_dir.glob("*.checkpoint")):
            stale.unlink()  # a previous run's files would be read as part of this log
        self._partition_dir = partition_dir
        self._config = config
        self._segments = SegmentRoller(partition_dir, segment_bytes=segment_bytes, leader_epoch=config.leader_epoch,
                                       leader_id=config.controller_id, timestamp_ms=config.start_time_ms)
        self._stream_path = self.root / "stream.jsonl"
        self._records_path = self.root / "records.jsonl"
        self._stream: TextIO = self._stream_path.open("w", encoding="utf-8")
        self._records: TextIO | None = self._records_path.open("w", encoding="utf-8") if write_records_jsonl else None
        self.requests = 0
        self.records = 0
        self.batches = 0
        self._finished: OutputPaths | None = None

    @property
    def log_bytes(self) -> int:
        return self._segments.bytes_written

    # -- sink --------------------------------------------------------------------------------------------------

    def on_request(self, entry: RequestEntry) -> None:
        self.write_stream_entry(entry)
        self.requests += 1

    def write_stream_entry(self, entry: StreamEntry) -> None:
        """One line of stream.jsonl (a request, or a record committed outside any request)."""
        self._stream.write(entry_to_line(entry))
        self._stream.write("\n")

    def on_batch(self, entries: Sequence[LogEntry], *, outside: bool) -> None:
        self._segments.append(entries)
        self.batches += 1
        self.records += len(entries)
        if self._records is None and not outside:
            return
        for entry in entries:
            line = entry_to_line(entry)
            if self._records is not None:
                self._records.write(line)
                self._records.write("\n")
            if outside:
                self._stream.write(line)
                self._stream.write("\n")

    # -- end of run --------------------------------------------------------------------------------------------

    def finish(self, result: SimulationResult, *, snapshot: bool = True) -> OutputPaths:
        """Close the log, write the final snapshot, meta.properties, timeline, happenings and summary."""
        if self._finished is not None:
            return self._finished
        self._segments.close()
        self._stream.close()
        if self._records is not None:
            self._records.close()
        snap: Path | None = None
        last_offset = self._segments.next_offset - 1
        if snapshot and last_offset >= 0:
            snap = write_snapshot(
                snapshot_path(self._partition_dir, SnapshotId(last_offset + 1, self._segments.last_epoch)),
                snapshot_records(result.image), epoch=self._segments.last_epoch,
                last_contained_log_timestamp=self._segments.last_timestamp,
                timestamp=self._config.start_time_ms + result.end_time_ms)
        metas = self._write_meta_properties(result)
        timeline = self.root / "timeline.jsonl"
        with timeline.open("w", encoding="utf-8") as out:
            for interval in result.timeline:
                out.write(json.dumps(interval.to_json(), separators=(",", ":")) + "\n")
        happenings = self.root / "happenings.jsonl"
        with happenings.open("w", encoding="utf-8") as out:
            for happening in result.happenings:
                out.write(json.dumps(happening.to_json(), separators=(",", ":")) + "\n")
        directories = _write_json(self.root / "directories.json", [d.to_json() for d in result.directories])
        summary = _write_json(self.root / "summary.json", {
            "scenario": result.name, "description": result.description, "seed": result.seed,
            "clusterId": result.cluster_id, "metadataVersion": str(result.image.metadata_version),
            "endTimeMs": result.end_time_ms, "quiescent": result.quiescent,
            "brokers": len(result.config.brokers), "topics": len(result.image.topics.by_id),
            "partitions": sum(len(t.partitions) for t in result.image.topics.by_id.values()),
            "requests": result.stats.requests, "records": result.stats.records, "batches": result.stats.batches,
            "lastOffset": result.stats.last_offset, "logBytes": self.log_bytes,
            "segments": [p.name for p in self._segments.segments],
            "snapshot": snap.name if snap is not None else None,
            "offlineIntervals": len(result.timeline),
            "openOfflineIntervals": sum(1 for i in result.timeline if i.is_open),
            "violations": [str(v) for v in result.violations],
            "invariantViolations": [f"{v.invariant} ({v.severity.value}) at offset {v.offset}: {v.message}"
                                    for v in result.invariant_violations],
        })
        self._finished = OutputPaths(
            root=self.root, metadata_dir=self.metadata_dir, segments=tuple(self._segments.segments), snapshot=snap,
            stream=self._stream_path, records=self._records_path, timeline=timeline, happenings=happenings,
            directories=directories, summary=summary, meta_properties=metas)
        return self._finished

    def _write_meta_properties(self, result: SimulationResult) -> tuple[Path, ...]:
        """One ``meta.properties`` per disk in use at the end (``kafka-storage format``: version 1, node.id,
        cluster.id, directory.id), dated at the simulation's start so the files are reproducible. Replaced and
        removed disks are only listed in directories.json: their path now belongs to another disk, or to none."""
        date = datetime.fromtimestamp(self._config.start_time_ms / 1000, tz=UTC)
        paths: list[Path] = []
        for d in result.directories:
            if d.status.value in ("REPLACED", "REMOVED"):
                continue
            meta = MetaProperties(version=MetaPropertiesVersion.V1, cluster_id=result.cluster_id, node_id=d.broker_id,
                                  directory_id=d.directory_id)
            path = self.root / d.path / "meta.properties"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(to_text(meta, date=date), encoding="utf-8")
            paths.append(path)
        return tuple(paths)


def write_result(result: SimulationResult, root: str | Path, *, segment_bytes: int = DEFAULT_SEGMENT_BYTES,
                 snapshot: bool = True) -> OutputPaths:
    """Write a run kept in memory (``stream`` and ``log`` present) to ``root``."""
    if result.stream is None or result.log is None:
        raise ValueError("this result was streamed to files during the run; use that OutputWriter's finish()")
    writer = OutputWriter(root, result.config, segment_bytes=segment_bytes)
    for item in result.stream:
        writer.write_stream_entry(item)
    for batch in group_batches(result.log):
        writer.on_batch(batch, outside=False)
    return writer.finish(result, snapshot=snapshot)


# -- a list of entries on disk (the churn workload's logs in tests and benchmarks) -----------------------------------

def write_metadata_dir(root: str | Path, entries: Sequence[LogEntry], *, cluster_id: str,
                       records_per_segment: int | None = None, node_id: int = 1,
                       snapshot_at: int | None = None) -> Path:
    """Write ``entries`` as a node's metadata log dir under ``root``: ``meta.properties`` and
    ``__cluster_metadata-0`` with segments (one batch per original batch, rolled every ``records_per_segment``
    records) and, with ``snapshot_at``, a snapshot of the image after offsets ``< snapshot_at``."""
    root = Path(root)
    part = root / METADATA_PARTITION_DIR
    part.mkdir(parents=True, exist_ok=True)
    meta = MetaProperties(version=MetaPropertiesVersion.V1, cluster_id=cluster_id, node_id=node_id)
    (root / "meta.properties").write_text(to_text(meta), encoding="utf-8")
    segment: SegmentWriter | None = None
    in_segment = 0
    for batch in group_batches(entries):
        if segment is None or (records_per_segment is not None and in_segment >= records_per_segment):
            if segment is not None:
                segment.close()
            segment = SegmentWriter(part / segment_file_name(batch[0].offset))
            in_segment = 0
        segment.append_batch(batch, leader_epoch=batch[0].leader_epoch, timestamp=batch[0].timestamp)
        in_segment += len(batch)
    if segment is not None:
        segment.close()
    if snapshot_at is not None:
        image = replay_entries([e for e in entries if e.offset < snapshot_at])
        last = max((e.timestamp or 0) for e in entries if e.offset < snapshot_at)
        write_snapshot(snapshot_path(part, SnapshotId(snapshot_at, 1)), image.to_records(), epoch=1,
                       last_contained_log_timestamp=last, timestamp=last)
    return root


def append_to_segment(segment: str | Path, entries: Sequence[LogEntry]) -> None:
    """Append entries (one batch per original batch) to an existing segment, as a live log grows."""
    with open(segment, "ab") as f:
        for batch in group_batches(entries):
            f.write(encode_batch(batch, leader_epoch=batch[0].leader_epoch, timestamp=batch[0].timestamp))


def corrupt_batch(root: str | Path, offset: int) -> tuple[Path, int, int]:
    """Flip one byte inside the records of the batch holding ``offset`` in the metadata log dir ``root``, so that its
    CRC-32C fails while its framing stays sound (a disk or copy error). Returns the segment and the batch's first and
    last offsets."""
    for segment in sorted((Path(root) / METADATA_PARTITION_DIR).glob("*.log")):
        for batch in iter_batches(segment):
            h = batch.header
            if h.base_offset <= offset <= h.last_offset:
                data = bytearray(segment.read_bytes())
                data[h.position + h.size - 1] ^= 0xFF  # the last byte of the batch: inside its last record
                segment.write_bytes(bytes(data))
                return segment, h.base_offset, h.last_offset
    raise ValueError(f"no batch holds offset {offset} under {root}")


def write_jsonl_file(path: str | Path, entries: Sequence[LogEntry]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        write_jsonl(entries, f)
    return path
