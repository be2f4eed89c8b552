"""Table rows as JSON text made by Arrow's kernels: the long lists of ``jbod image --tables --json``.

The image JSON (docs/image-json.md) of a 2 M-partition cluster holds 8 M objects, 1.7 GB of text. Made as Python
values (``to_pylist``, a dict per row) and encoded by orjson, a row cost about 2 µs: 16 s of a 2 M image's 27 s
(docs/performance.md, "The image's rows as text"). Here each column becomes its values' JSON text with Arrow's casts
and string kernels, the row's object text is joined from those and its keys' texts, and a slice's rows are one
string cut from the joined column's data buffer. The kernels release the GIL, so slices are made on every core.

The text is the one :func:`~jbod_model.records.json_codec.dumps_without_floats` writes for the rows' Python values,
byte for byte (``tests/properties/test_json_text_properties.py``): integers and booleans in their shortest form
(Arrow's cast to text), strings copied between quotes, lists of those, ``null``. Where that cannot be said without
more — a string holding a character JSON escapes (a quote, a backslash, a control character; orjson escapes those
and no other), a type with no such form here (floats, times, maps) — :func:`rows_json` gives None and the caller
writes that slice the reference way.
"""

from __future__ import annotations

import codecs
import os
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jbod_model.records.json_codec import dumps_without_floats

#: Rows a text slice holds: about 3 MB of the replicas' text, and enough rows that the kernels' per-call cost is
#: small beside their work (4,096-row slices took 30–50 % longer at 2 M partitions).
TEXT_ROWS: Final = 16_384


def rows_json(table: pa.Table, names: Sequence[str]) -> str | None:
    """The JSON text of ``table``'s rows as objects whose keys are ``names`` (one per column, in order), joined by
    ``,`` without the list's brackets — ``dumps_without_floats([{name: value, …}, …])[1:-1]`` — or None where a
    column needs the reference encoder (module docstring). No rows: the empty string."""
    if table.num_rows == 0:
        return ""
    parts: list[str | pa.Array] = []
    for i, (name, column) in enumerate(zip(names, table.columns, strict=True)):
        text = _texts(column.chunk(0) if column.num_chunks == 1 else column.combine_chunks())
        if text is None:
            return None
        parts += [("{" if i == 0 else ",") + dumps_without_floats(name) + ":", text]
    # Each row's text ends with the comma that separates it from the next: the rows joined are then the column's
    # data buffer as it is, from the first row's start to the last row's end, less that last comma.
    parts.append("},")
    rows = pc.binary_join_element_wise(*parts, "")
    offsets = _offsets(rows)
    return codecs.decode(memoryview(rows.buffers()[2])[offsets[0]:offsets[-1] - 1], "utf-8")


def _offsets(text: pa.Array) -> np.ndarray[Any, np.dtype[np.int32]]:
    """The value offsets of the text array ``text`` (a slice's own: its first row's start to its last row's end)."""
    return np.frombuffer(text.buffers()[1], dtype=np.int32, count=len(text) + 1, offset=text.offset * 4)


def _texts(column: pa.Array) -> pa.Array | None:
    """Each value's JSON text (``null`` for a null), or None."""
    if pa.types.is_list(column.type):
        offsets = column.offsets
        lo, hi = offsets[0].as_py(), offsets[-1].as_py()
        values = _scalar_texts(column.values.slice(lo, hi - lo))
        if values is None:
            return None
        lists = pa.ListArray.from_arrays(pc.subtract(offsets, lo), _or_null(values),
                                         mask=column.is_null() if column.null_count else None)
        text = pc.binary_join_element_wise("[", pc.binary_join(lists, ","), "]", "")
    else:
        text = _scalar_texts(column)
        if text is None:
            return None
    return _or_null(text)


def _scalar_texts(column: pa.Array) -> pa.Array | None:
    """Each value's JSON text, null for a null; None for a type not written here or a string JSON escapes."""
    kind = column.type
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind):
        return pc.cast(column, pa.string())
    if pa.types.is_string(kind) and not _any_escaped(column):
        return pc.binary_join_element_wise('"', column, '"', "")
    return None


def _any_escaped(column: pa.Array) -> bool:
    """Whether a value of the text ``column`` holds a byte that orjson escapes — a control character (U+0000–U+001F),
    a quote or a backslash, RFC 8259's minimum; a byte of a longer UTF-8 sequence is never below 0x80. Its values'
    bytes are one range of its data buffer (a null's range is empty). Three comparisons of the bytes, not a lookup
    table: 0.4 ns a byte against 3.6 (at 2 M partitions the image's text columns hold 0.5 GB)."""
    data = column.buffers()[2]
    if data is None or len(column) == 0:
        return False
    offsets = _offsets(column)
    values = np.frombuffer(data, dtype=np.uint8)[offsets[0]:offsets[-1]]
    return bool((values < 0x20).any() or (values == ord('"')).any() or (values == ord("\\")).any())


def _or_null(text: pa.Array) -> pa.Array:
    return pc.fill_null(text, "null") if text.null_count else text


def text_slices(table: pa.Table, names: Sequence[str], objects: Callable[[pa.Table], list[dict[str, Any]]], *,
                rows: int = TEXT_ROWS, threads: int | None = None) -> Iterator[str | list[dict[str, Any]]]:
    """``table``'s rows a slice of ``rows`` at a time, in order, as :func:`rows_json`'s text — or, for a slice it
    cannot write, ``objects(slice)``: the rows as Python values for the reference encoder (made here, in the
    consumer's thread). The texts are made ``threads`` (default: one per core) at a time, at most two slices per
    thread ahead of the consumer; closing the iterator early cancels what is not started."""
    starts = iter(range(0, table.num_rows, rows))
    workers = max(1, threads if threads is not None else os.cpu_count() or 1)
    pool = ThreadPoolExecutor(workers, thread_name_prefix="json-text")
    pending: deque[tuple[int, Future[str | None]]] = deque()

    def submit() -> None:
        for lo in starts:
            pending.append((lo, pool.submit(rows_json, table.slice(lo, rows), names)))
            if len(pending) >= 2 * workers:
                return

    try:
        submit()
        while pending:
            lo, made = pending.popleft()
            text = made.result()
            submit()
            yield objects(table.slice(lo, rows)) if text is None else text
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
