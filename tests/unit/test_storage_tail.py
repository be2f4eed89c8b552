"""``scan_tail``: the end of the complete batches of a growing segment, scanned incrementally."""

from __future__ import annotations

from pathlib import Path

from jbod_model.records.entry import LogEntry
from jbod_model.records.metadata import NoOpRecord
from jbod_model.storage.log_writer import encode_batch
from jbod_model.storage.tail import TailScan, scan_tail


def _batch(first: int, n: int) -> bytes:
    return encode_batch([LogEntry(offset=first + i, record=NoOpRecord()) for i in range(n)], leader_epoch=1,
                        timestamp=1000)


def test_complete_batches_only_and_incremental(tmp_path: Path) -> None:
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(b"")
    assert scan_tail(seg) == TailScan(0, None)
    one, two = _batch(0, 3), _batch(3, 2)
    seg.write_bytes(one + two[:20])  # the second batch is still being written
    first = scan_tail(seg)
    assert first == TailScan(len(one), 3)
    with seg.open("ab") as f:
        f.write(two[20:])
    assert scan_tail(seg, first) == TailScan(len(one) + len(two), 5)


def test_a_batch_whose_bytes_are_not_all_written_yet_is_not_complete(tmp_path: Path) -> None:
    seg = tmp_path / "00000000000000000000.log"
    one = _batch(0, 1)
    seg.write_bytes(one[:-1] + bytes([one[-1] ^ 0xFF]))  # full length, wrong content: CRC fails
    assert scan_tail(seg) == TailScan(0, None)


def test_a_replaced_shorter_file_is_rescanned(tmp_path: Path) -> None:
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(_batch(0, 1))
    assert scan_tail(seg, TailScan(10_000, 40)) == TailScan(len(_batch(0, 1)), 1)


def test_a_damaged_batch_followed_by_an_intact_one_is_passed_over(tmp_path: Path) -> None:
    """A writer appends in order: a complete batch after a CRC failure means the failing one is damaged, not being
    written, and the stream must not stop before it forever (the reader fails on it or skips it)."""
    seg = tmp_path / "00000000000000000000.log"
    one, two, three = _batch(0, 2), _batch(2, 3), _batch(5, 1)
    damaged = two[:-1] + bytes([two[-1] ^ 0xFF])
    seg.write_bytes(one + damaged + three)
    assert scan_tail(seg) == TailScan(len(one) + len(two) + len(three), 6)
    seg.write_bytes(one + damaged + three[:20])  # the batch after it is still being written: stop before both
    assert scan_tail(seg) == TailScan(len(one), 2)
