"""Every real Kafka ``.log`` / ``.checkpoint`` sample decodes completely and re-encodes byte for byte.

The samples live beside the repository in ``../shared/kraft-metadata-samples`` (never copied in); the expected
per-file batch counts, CRC failures and per-type/version record counts come from its ``RECORD_COUNTS.txt``,
which an independent scratch decoder produced. The tests skip when the samples are absent.
"""

from __future__ import annotations

import collections
import hashlib
import json
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest
from samples_support import COUNTS_FILE, SAMPLE_FILES, sample_path
from samples_support import SAMPLES_DIR as SAMPLES

from jbod_model.records.binary import UnknownRecordWarning, encode_record
from jbod_model.records.control import OpaqueControlRecord, control_type_name, encode_control_record
from jbod_model.records.json_codec import record_to_json, typed_record_reader
from jbod_model.records.metadata import OpaqueRecord, RegisterBrokerRecord, RegisterControllerRecord
from jbod_model.storage.log_reader import ReadReport, iter_batches, read_log_entries

pytestmark = pytest.mark.samples

_HEADER_LINE = re.compile(r"^(\S+) size=(\d+) batches=(\d+) crcbad=(\d+) sha256=([0-9a-f]+)$")


@dataclass(frozen=True)
class Expected:
    path: str
    size: int
    batches: int
    crc_failures: int
    sha256_prefix: str
    counts: dict[str, int]


def parse_record_counts(text: str) -> list[Expected]:
    """``<path> size=N batches=N crcbad=N sha256=<prefix>`` lines, each followed by ``counts: {json}``."""
    out: list[Expected] = []
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    for head, counts in zip(lines[::2], lines[1::2], strict=True):
        m = _HEADER_LINE.match(head.strip())
        assert m, f"unexpected RECORD_COUNTS line: {head!r}"
        assert counts.strip().startswith("counts: "), counts
        out.append(Expected(m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)), m.group(5),
                            json.loads(counts.strip()[len("counts: "):])))
    return out


EXPECTED = parse_record_counts(COUNTS_FILE.read_text()) if COUNTS_FILE.is_file() else []
#: One case per listed sample file, whether or not the samples are here (absent ones skip, naming the path).
PARAMS = [pytest.param(relative, id=relative) for relative in SAMPLE_FILES]


def _path(relative: str) -> tuple[Expected, Path]:
    path = sample_path(relative)
    expected = {e.path: e for e in EXPECTED}.get(relative)
    if expected is None:
        pytest.fail(f"{relative} is not listed in {COUNTS_FILE}")
    return expected, path


def test_record_counts_parser() -> None:
    parsed = parse_record_counts('a/b.log size=3 batches=2 crcbad=0 sha256=00ff\n   counts: {"X v0": 1}\n')
    assert parsed == [Expected("a/b.log", 3, 2, 0, "00ff", {"X v0": 1})]


@pytest.mark.parametrize("expected", PARAMS)
def test_sample_is_the_listed_file(expected: str) -> None:
    exp, path = _path(expected)
    data = path.read_bytes()
    assert len(data) == exp.size
    assert hashlib.sha256(data).hexdigest().startswith(exp.sha256_prefix)


@pytest.mark.parametrize("expected", PARAMS)
def test_sample_decodes_with_the_listed_counts(expected: str) -> None:
    exp, path = _path(expected)
    counts: collections.Counter[str] = collections.Counter()
    batches = crc_failures = 0
    end = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnknownRecordWarning)  # every sample record has a schema here
        for batch in iter_batches(path, verify_crc=False):
            batches += 1
            crc_failures += not batch.header.crc_valid
            end = batch.header.position + batch.header.size
            for entry in batch.entries:
                assert not isinstance(entry.record, OpaqueRecord)
                counts[f"{type(entry.record).TYPE_NAME} v{entry.record.version}"] += 1
            for control in batch.controls:
                assert not isinstance(control.record, OpaqueControlRecord)
                counts[f"CTRL:{control_type_name(control.control_type)}"] += 1
    assert (batches, crc_failures) == (exp.batches, exp.crc_failures) == (exp.batches, 0)
    assert end == exp.size  # no trailing bytes after the last batch
    assert dict(counts) == exp.counts


@pytest.mark.parametrize("expected", PARAMS)
def test_every_record_value_round_trips_byte_for_byte(expected: str) -> None:
    _exp, path = _path(expected)
    checked = 0
    for batch in iter_batches(path):
        if batch.is_control:
            for control, value in zip(batch.controls, batch.values, strict=True):
                key, encoded = encode_control_record(control.record)
                assert key == control.control_type.to_bytes(4, "big")
                assert encoded == value, f"{path.name} offset {control.offset}"
                checked += 1
        else:
            for entry, value in zip(batch.entries, batch.values, strict=True):
                assert encode_record(entry.record) == value, f"{path.name} offset {entry.offset}"
                checked += 1
    assert checked == sum(_exp.counts.values())


@pytest.mark.parametrize("expected", PARAMS)
def test_fast_entry_path_agrees_with_batches(expected: str) -> None:
    exp, path = _path(expected)
    report = ReadReport()
    fast = list(read_log_entries(path, report=report))
    slow = [e for batch in iter_batches(path) for e in batch.entries]
    assert fast == slow
    assert report.clean and report.batches == exp.batches and report.bytes_read == exp.size
    assert report.records + report.control_records == sum(exp.counts.values())
    assert all(e.source == str(path) for e in fast)


def test_every_sample_file_is_listed() -> None:
    if not EXPECTED:
        pytest.skip(f"real Kafka samples not found at {SAMPLES} (expected ../shared beside the repo)")
    on_disk = {str(p.relative_to(SAMPLES)) for p in SAMPLES.rglob("*")
               if p.suffix in (".log", ".checkpoint") and p.is_file()}
    assert on_disk == {e.path for e in EXPECTED} == set(SAMPLE_FILES)


#: The record classes without a generated JSON reader: their arrays of structs (a broker's or a controller's
#: endpoints and features) are read by the reference reader. Kafka writes a few of them per node start.
_REFERENCE_READ = frozenset({RegisterBrokerRecord, RegisterControllerRecord})


@pytest.mark.parametrize("expected", PARAMS)
def test_every_record_of_kafkas_logs_reads_back_from_its_json_through_a_generated_reader(expected: str) -> None:
    """What the job's operator and the tables' readers do with every record (``typed_record_reader`` over the JSON the
    source wrote): on Kafka's own files, each record of a class with a generated reader reads back to itself through
    it, at every version Kafka wrote — the 4.2 log's version-2 partition records included, which once took the
    reference reader, nine times slower."""
    _exp, path = _path(expected)
    read = 0
    for batch in iter_batches(path):
        for entry in batch.entries:
            obj = record_to_json(entry.record)
            reader = typed_record_reader(obj["type"], obj["version"])
            if type(entry.record) in _REFERENCE_READ:
                assert reader is None, f"{type(entry.record).__name__} has a generated reader now: drop it here"
                continue
            assert reader is not None, f"{path.name} offset {entry.offset}: no generated reader for {obj['type']} " \
                                       f"v{obj['version']}"
            assert reader(obj["data"]) == entry.record, f"{path.name} offset {entry.offset}"
            read += 1
    assert read > 0
