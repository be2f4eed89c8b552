"""What every suite's frame builders share: the :class:`Frame` a suite's expectations validate, the model objects
rebuilt from the current tables (:class:`Model`), the per-cluster build context (:class:`Build`) and the small
conversions of table cells (nullable ints, lists, directory ids)."""

from __future__ import annotations

import functools
import itertools
import math
import operator
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from jbod_model import invariants as inv
from jbod_model.errors import JbodError
from jbod_model.image import BrokerRegistration, ClusterImage, PartitionRegistration
from jbod_model.metadata_version import FEATURE_NAME, UNSET, MetadataVersion
from jbod_model.records.metadata import (
    Record,
)
from jbod_model.uuid import Uuid
from pipelines.config.profiles import QualitySettings
from pipelines.lakehouse.tables import key_packing, pack_keys, record_from_row
from pipelines.quality.expectations import column_of
from pipelines.quality.inputs import ExternalInputs, TableSet


class Uuids:
    """Ids parsed once, None for a text that is no id (a cluster has few distinct directories and topics and
    millions of replica rows)."""

    def __init__(self) -> None:
        self._cache: dict[str, Uuid | None] = {}

    def get(self, text: Any) -> Uuid | None:
        try:
            return self._cache[text]  # a text seen before: one lookup (millions of cells, a few hundred ids)
        except (KeyError, TypeError):
            pass
        if text is None or (isinstance(text, float) and math.isnan(text)):
            return None
        key = str(text)
        if key not in self._cache:
            try:
                self._cache[key] = Uuid.from_string(key)
            except (JbodError, ValueError):
                self._cache[key] = None
        return self._cache[key]


def as_ints(values: Any) -> tuple[int, ...]:
    """A list cell of ints (a table's cells come as NumPy arrays) as a tuple of Python ints; a null as ()."""
    if type(values) is np.ndarray and values.dtype.kind in "iu":
        # NumPy makes the Python ints in C: 5x faster than int() over its scalars, on millions of cells.
        return tuple(values.tolist())
    if values is None or (isinstance(values, float) and math.isnan(values)):
        return ()
    return tuple(int(v) for v in values)


def as_texts(values: Any) -> list[str]:
    """A list cell of strings as a list of str; a null as []."""
    if type(values) is np.ndarray:
        values = values.tolist()
    if values is None or (isinstance(values, float) and math.isnan(values)):
        return []
    return [v if type(v) is str else str(v) for v in values]


def optional_int(value: Any) -> int | None:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    return int(value)


def column_values(column: pd.Series) -> list[Any]:
    """A column's values as Python values, a null as None."""
    return column.to_numpy(dtype=object, na_value=None).tolist()  # type: ignore[no-any-return]


def column_ints(column: pd.Series) -> list[int | None]:
    """An integer column's values as ints (pandas gives a column with nulls as floats), a null as None: each value
    :func:`optional_int`, but a column without a null converted whole by NumPy (the log suite reads a million values
    of each of its integer columns at 200 k partitions)."""
    if isinstance(column.dtype, np.dtype) and column.dtype.kind in "iu":  # NumPy's: no null in it
        return column.tolist()  # type: ignore[no-any-return]
    if pd.api.types.is_integer_dtype(column.dtype) and not column.isna().any():  # pandas' nullable Int64
        return column.to_numpy(dtype="int64").tolist()  # type: ignore[no-any-return]
    return [optional_int(v) for v in column_values(column)]


#: What :meth:`Build.record` reads of a ``records`` row.
RECORD_COLUMNS = ("offset", "snapshot_index", "type", "version", "data", "payload")

def table_rows(frame: pd.DataFrame, *columns: str) -> Iterator[Any]:
    """``frame.itertuples()`` over ``columns`` only (those the frame has): the table's time columns would box each
    cell into a pandas Timestamp the builder never reads — millions of them on a large cluster's tables."""
    picked: Iterator[Any] = frame[[c for c in dict.fromkeys(columns) if c in frame.columns]].itertuples()
    return picked


def sorted_by(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """``frame.sort_values(columns)``, or ``frame`` itself where it is in that order already (ties keep their order,
    as the sort, which is stable over several columns, keeps them): a history read from the tables comes sorted by
    its key and start (``history_table``), and pandas' sort of the 691 k replica versions at 200 k partitions took
    0.5 s to give back the same order. A categorical column is in the order of its codes, as pandas sorts it; a
    column with a null goes to pandas."""
    keys = []
    for name in columns:
        column = frame[name]
        if column.hasnans:
            return frame.sort_values(list(columns))
        keys.append(column.cat.codes.to_numpy() if isinstance(column.dtype, pd.CategoricalDtype)
                    else column.to_numpy(dtype=np.int64 if pd.api.types.is_integer_dtype(column.dtype) else None))
    ascending = np.ones(max(len(frame) - 1, 0), dtype=bool)
    for key in reversed(keys):  # the last column first: a row pair is in order by it only where the others tie
        ascending = (key[:-1] < key[1:]) | ((key[:-1] == key[1:]) & ascending)
    return frame if ascending.all() else frame.sort_values(list(columns))


def make_frame(rows: list[dict[str, Any]], columns: Mapping[str, str], checks: Sequence[str] = ()) -> pd.DataFrame:
    """A frame with fixed nullable dtypes (``Int64``, ``boolean``, ``string``, ``object``): an empty frame still has
    typed columns, and nulls stay nulls on the way to Spark. ``checks`` names the predicate expectations whose
    boolean columns (:func:`column_of`) the rows carry."""
    names = [*columns, *map(column_of, checks)]
    return make_columns_frame({name: [r.get(name) for r in rows] for name in names}, columns, checks)


def make_columns_frame(data: Mapping[str, Any], columns: Mapping[str, str],
                       checks: Sequence[str] = ()) -> pd.DataFrame:
    """:func:`make_frame` from its columns (each a list or array of one value per row, all of one length, ``None``
    a null), for a builder that has them as columns already: no dict per row."""
    columns = {**columns, **{column_of(name): "boolean" for name in checks}}
    frame = pd.DataFrame({name: _series(data[name], dtype) for name, dtype in columns.items()})
    frame.insert(0, "row", pd.Series(range(len(frame)), dtype="Int64"))
    return frame


#: pandas' nullable dtypes a list of plain values and None converts to through Arrow: the value types it may hold, the
#: Arrow type, the value a null's slot holds, and the pandas array of values and a null mask.
_MASKED: Mapping[str, tuple[frozenset[type], Any, Any, Callable[..., Any]]] = {
    "Int64": (frozenset({int, type(None)}), "int64", 0, pd.arrays.IntegerArray),
    "boolean": (frozenset({bool, type(None)}), "bool", False, pd.arrays.BooleanArray),
}


def _series(values: Any, dtype: str) -> pd.Series:
    """``pd.Series(values, dtype=dtype)``. A list of ints or bools with Nones (a frame's number and flag columns)
    converts through Arrow into pandas' values-and-mask array in C: pandas' own conversion of a list into a nullable
    dtype checks each value in Python (0.136 against 0.025 s for 600 k ints). Anything else — other types, a value
    Arrow refuses — goes pandas' way, which gives the same result or raises its own error."""
    masked = _MASKED.get(dtype)
    if masked is not None and type(values) is np.ndarray and values.dtype == object:
        # A column taken from a table or concatenated as objects: the list's way below, not pandas' per value.
        values = values.tolist()
    if masked is not None and type(values) is list and set(map(type, values)) <= masked[0]:
        _, arrow_type, filler, array = masked
        try:
            arrow = pa.array(values, type=arrow_type)
        except (pa.ArrowException, OverflowError):
            return pd.Series(values, dtype=dtype)
        mask = arrow.is_null().to_numpy(zero_copy_only=False)
        return pd.Series(array(arrow.fill_null(filler).to_numpy(zero_copy_only=False, writable=True), mask))
    return pd.Series(values, dtype=dtype)


def same_key_as_previous(frame: pd.DataFrame, key: Sequence[str]) -> Any:
    """For each row of ``frame`` but the first, whether the row before it has its ``key`` (none has a null key): a
    key's rows follow each other in a frame sorted by it."""
    same = np.ones(max(len(frame) - 1, 0), dtype=bool)
    for name in key:
        column = frame[name]
        if isinstance(column.dtype, pd.CategoricalDtype):
            values = column.cat.codes.to_numpy()
            null = values == -1
        else:
            values, null = column.to_numpy(), column.isna().to_numpy()
        same &= (values[:-1] == values[1:]) & ~null[:-1] & ~null[1:]
    return same


def distinct_rows(columns: Sequence[Any]) -> tuple[Any, list[tuple[int, ...]]]:
    """``pd.factorize`` of the rows of the int64 arrays ``columns``: each row's index among the distinct rows, and
    those rows (tuples of ints) in the order they first appear. Through one packed integer per row
    (:func:`~pipelines.lakehouse.tables.pack_keys`) where the values fit: a MultiIndex made a tuple per row (0.3 s
    for the 200 k cluster's placements)."""
    if not len(columns[0]):
        return np.empty(0, np.int64), []
    packing = key_packing([[values] for values in columns])
    if packing is None:
        which, distinct = pd.factorize(pd.MultiIndex.from_arrays(list(columns)))
        return which, [tuple(int(v) for v in row) for row in distinct]
    lows, spans, _ = packing
    which = pd.factorize(pack_keys(columns, lows, spans))[0]
    # Each distinct row's first place, in the order they appear: factorize numbers the rows in that order, so those
    # places are the rows that repeat no earlier one — found by a hash pass, where np.unique sorted every row's
    # number (0.8 s for 6 M rows, 4.2 s for 20 M, against 0.04 and 0.12 s).
    first = np.flatnonzero(~pd.Series(which, copy=False).duplicated().to_numpy())
    return which, list(zip(*(values[first].tolist() for values in columns), strict=True))


@dataclass(slots=True)
class Frame:
    """What one GX batch validates: ``data`` (flat, typed columns), the ``keys`` that identify an offending row in
    a sample (``row`` and ``offset`` first), and ``context`` columns only the sample shows (lists …). ``skip`` is
    a reason the frame could not be built: its expectations are reported skipped."""

    name: str
    data: pd.DataFrame
    keys: tuple[str, ...]
    context: tuple[str, ...] = ()
    skip: str | None = None
    #: What the frame covered when its rows alone do not say (the log suite's rows are only violations).
    note: str | None = None

    def gx_data(self) -> pd.DataFrame:
        return self.data[[c for c in self.data.columns if c not in self.context]]


@dataclass(slots=True)
class Model:
    """Model objects for the current tables: brokers and the metadata.version, plus the clock (the partitions'
    registrations are :attr:`Build.partitions`, let go apart from these)."""

    mv: MetadataVersion
    cluster: ClusterImage
    uuids: Uuids
    now_offset: int
    now_ms: int | None


def _broker_registration(row: Any, uuids: Uuids) -> BrokerRegistration:
    dirs = [uuids.get(d) for d in as_texts(row.log_dirs)]
    return BrokerRegistration(id=int(row.broker_id), epoch=int(row.broker_epoch),
                              incarnation_id=uuids.get(row.incarnation_id) or Uuid(0, 0), fenced=bool(row.fenced),
                              in_controlled_shutdown=bool(row.in_controlled_shutdown),
                              is_migrating_zk_broker=bool(row.is_migrating_zk_broker),
                              directories=tuple(d for d in dirs if d is not None))


@dataclass(frozen=True, slots=True)
class PartitionRows:
    """The ``partitions`` table's columns that its registrations (:attr:`Build.partitions`) and frames read, as
    Python values, each converted once for all its readers (:attr:`Build.partition_rows`): a column's cells at a
    time, as :func:`as_ints`, :func:`as_texts` and ``int`` convert them — the same values (and the same errors) as
    reading them row by row, at 200 k partitions 1.0 s where the rows' tuples and a conversion call per cell cost
    2.5 s (docs/data-quality.md, "fifteenth round"). The lists' tuples are the ones the registrations hold."""

    topic_ids: list[str]
    partition_ids: list[int]
    replicas: list[tuple[int, ...]]
    #: Each row's directory ids as their texts.
    directories: list[list[str]]
    isr: list[tuple[int, ...]]
    removing_replicas: list[tuple[int, ...]]
    adding_replicas: list[tuple[int, ...]]
    elr: list[tuple[int, ...]]
    last_known_elr: list[tuple[int, ...]]
    leader: list[int]
    leader_recovery_state: list[int]
    leader_epoch: list[int]
    partition_epoch: list[int]

    @classmethod
    def of(cls, table: pd.DataFrame, arrow: pa.Table | None = None) -> PartitionRows:
        """The rows of ``table``; its list columns read from ``arrow`` where given (the table read, its list columns
        not in ``table``: :meth:`TableSet.lists_apart`), the same values as from pandas' cells
        (:func:`_arrow_int_tuples`)."""

        def int_tuples(name: str) -> list[tuple[int, ...]]:
            if arrow is None:
                return _int_tuples(table[name])
            fast = _arrow_int_tuples(arrow.column(name))
            return _int_tuples(arrow.column(name).to_pandas()) if fast is None else fast

        directories = (table["directories"].tolist() if arrow is None else arrow.column("directories").to_pylist())
        return cls(topic_ids=[t if type(t) is str else str(t) for t in table["topic_id"].tolist()],
                   partition_ids=_column_ints(table["partition_id"]), replicas=int_tuples("replicas"),
                   directories=[as_texts(v) for v in directories], isr=int_tuples("isr"),
                   removing_replicas=int_tuples("removing_replicas"),
                   adding_replicas=int_tuples("adding_replicas"),
                   elr=int_tuples("eligible_leader_replicas"),
                   last_known_elr=int_tuples("last_known_elr"), leader=_column_ints(table["leader"]),
                   leader_recovery_state=_column_ints(table["leader_recovery_state"]),
                   leader_epoch=_column_ints(table["leader_epoch"]),
                   partition_epoch=_column_ints(table["partition_epoch"]))

    def registration(self, i: int, directories: tuple[Uuid, ...]) -> PartitionRegistration:
        """Row ``i``'s registration with ``directories`` (``()`` leaves them empty: the constructor refuses a
        mismatched array; I1 reports those rows)."""
        return PartitionRegistration(
            replicas=self.replicas[i], directories=directories, isr=self.isr[i],
            removing_replicas=self.removing_replicas[i], adding_replicas=self.adding_replicas[i], elr=self.elr[i],
            last_known_elr=self.last_known_elr[i], leader=self.leader[i],
            leader_recovery_state=self.leader_recovery_state[i], leader_epoch=self.leader_epoch[i],
            partition_epoch=self.partition_epoch[i])


def _int_tuples(column: pd.Series) -> list[tuple[int, ...]]:
    """:func:`as_ints` of each cell of a list column (NumPy's int arrays, as a table's cells come, inline)."""
    ndarray = np.ndarray
    return [tuple(v.tolist()) if type(v) is ndarray and v.dtype.kind in "iu" else as_ints(v)
            for v in column.tolist()]


def _arrow_int_tuples(column: pa.ChunkedArray) -> list[tuple[int, ...]] | None:
    """:func:`_int_tuples` of the pandas column made from ``column`` (an Arrow list of integers), made from the
    list's values and offsets: each cell a slice of one list of Python ints (0.09 against 0.20 s a column of 200 k
    cells, its conversion to pandas included). A null cell is (), as :func:`as_ints` makes it. None for anything
    else (a null among the values, which :func:`as_ints` refuses; not a list of integers): the caller converts
    pandas' cells."""
    if not pa.types.is_list(column.type) or not pa.types.is_integer(column.type.value_type):
        return None
    lists = column.combine_chunks()
    values = lists.values  # the values of every cell, those of null cells included, in order
    if values.null_count:
        return None
    flat = values.to_pylist()
    cells = [tuple(flat[start:end]) for start, end in itertools.pairwise(lists.offsets.to_pylist())]
    if lists.null_count:  # Arrow leaves a null cell's range to the writer: () whatever it spans
        cells = [cell if valid else () for cell, valid in zip(cells, lists.is_valid().to_pylist(), strict=True)]
    return cells


def _column_ints(column: pd.Series) -> list[int]:
    """``int`` of each cell of an integer column: a NumPy int column's values as NumPy makes them; anything else cell
    by cell, so that a null fails as ``int`` of it does."""
    if isinstance(column.dtype, np.dtype) and column.dtype.kind in "iu":
        return column.tolist()  # type: ignore[no-any-return]
    return [int(v) for v in column.tolist()]


def _current_mv(features: pd.DataFrame) -> MetadataVersion:
    rows = features[features["name"] == FEATURE_NAME]
    return UNSET if rows.empty else MetadataVersion(int(rows["level"].iloc[0]))


#: ``x is None`` in C (``None in ids`` would call each Uuid's ``__eq__``).
_is_none = functools.partial(operator.is_, None)


#: The tables :attr:`Build.model` reads (a frame that uses the model says so in its suite's ``READS``).
MODEL_TABLES = frozenset({"brokers", "features"})
#: What a frame that reads :attr:`Build.partition_rows` names in its suite's ``READS``, besides ``partitions``.
PARTITION_ROWS = "partition_rows"


def _model(tables: TableSet) -> Model:
    uuids = Uuids()
    brokers = {int(r.broker_id): _broker_registration(r, uuids) for r in tables.table("brokers").itertuples()}
    now_offset, now_ms = tables.clock()
    return Model(mv=_current_mv(tables.table("features")), cluster=ClusterImage(brokers=brokers), uuids=uuids,
                 now_offset=now_offset, now_ms=now_ms)


def _registrations(rows: PartitionRows, uuids: Uuids) -> dict[tuple[str, int], PartitionRegistration | None]:
    partitions: dict[tuple[str, int], PartitionRegistration | None] = {}
    get = uuids.get
    from_fields = PartitionRegistration.from_fields
    for i, (topic, partition, replicas, texts) in enumerate(zip(rows.topic_ids, rows.partition_ids, rows.replicas,
                                                                 rows.directories, strict=True)):
        dirs = tuple(map(get, texts))
        usable = inv.directories_length_ok(replicas, texts) and not any(map(_is_none, dirs))
        # Lengths checked and every id parsed: what the constructor checks holds, so the registration is built
        # without its keyword __init__.
        partitions[(topic, partition)] = from_fields(
            replicas, dirs, rows.isr[i], rows.removing_replicas[i], rows.adding_replicas[i],  # type: ignore[arg-type]
            rows.elr[i], rows.last_known_elr[i], rows.leader[i], rows.leader_recovery_state[i],
            rows.leader_epoch[i], rows.partition_epoch[i]) if usable else None
    return partitions


@dataclass(slots=True)
class Build:
    """What frame builders share for one cluster: the tables, the settings, the external inputs, and the model
    objects (built once, on first use, and held until :meth:`release_all_but` lets them go)."""

    tables: TableSet
    settings: QualitySettings
    inputs: ExternalInputs
    _model: Model | None = None
    _partitions: dict[tuple[str, int], PartitionRegistration | None] | None = None
    _partition_rows: PartitionRows | None = None
    _partition_table: pd.DataFrame | None = None

    @property
    def model(self) -> Model:
        if self._model is None:
            self._model = _model(self.tables)
        return self._model

    @property
    def partitions(self) -> dict[tuple[str, int], PartitionRegistration | None]:
        """(topic id text, partition id) → the registration of the ``partitions`` table's row; None when its
        arrays cannot form one (I1, or ids that do not parse). Read with the table: a frame that reads either says
        ``partitions`` in its suite's ``READS``."""
        if self._partitions is None:
            self._partitions = _registrations(self.partition_rows, self.model.uuids)
        return self._partitions

    @property
    def partition_rows(self) -> PartitionRows:
        """The ``partitions`` table's columns as Python values (:class:`PartitionRows`), held until no frame still to
        build reads them (:data:`PARTITION_ROWS` in its suite's ``READS``): the registrations, once built, hold
        what the later frames read, and at 2 M partitions the rows' own lists (the directories' texts above all)
        were about 0.5 GB beside them through the replicas frame."""
        if self._partition_rows is None:
            self._read_partitions()
        assert self._partition_rows is not None
        return self._partition_rows

    @property
    def partition_table(self) -> pd.DataFrame:
        """The ``partitions`` table, read with :attr:`partition_rows`: its list columns may be left out (they are
        :attr:`partition_rows`' own), every other column as :meth:`TableSet.table` gives it."""
        if self._partition_table is None:
            self._read_partitions()
        assert self._partition_table is not None
        return self._partition_table

    def _read_partitions(self) -> None:
        table, arrow = self.tables.lists_apart("partitions")
        self._partition_table, self._partition_rows = table, PartitionRows.of(table, arrow)

    @property
    def held(self) -> frozenset[str]:
        """The tables held now (:attr:`TableSet.held`), with ``partitions`` while their rows or registrations are."""
        held = self._partitions is not None or self._partition_rows is not None
        return (self.tables.held | ({"partitions"} if held else set())
                | ({PARTITION_ROWS} if self._partition_rows is not None else set()))

    def release_all_but(self, keep: Collection[str]) -> None:
        """Let go of every table not in ``keep`` that was read from the tables' directory — with ``partitions``,
        their registrations too (a later read reads them again). The frames still to build name what they read
        (``READS``): at 2 M partitions the partitions' table and registrations and the 6 M replica rows held
        gigabytes through every frame after their last reader."""
        self.tables.release_all_but(keep)
        if "partitions" not in keep:
            self._partitions = None
            self._partition_rows = None
            self._partition_table = None
        if PARTITION_ROWS not in keep:
            self._partition_rows = None

    def record(self, row: Any) -> Record | None:
        """A bronze row as a typed record (None if it does not decode — the job wrote it, so it always should).
        Not kept: the log suite reads every record once, batch by batch, and the frames that read records besides it
        read few (a registration, a feature level), so holding them all — 11 M at 2 M partitions — bought nothing."""
        return self.decode(row.type, int(row.version), row.data, getattr(row, "payload", None))

    @staticmethod
    def decode(type_name: str, version: int, data: str | None, payload: str | None) -> Record | None:
        """:meth:`record` of a row's values."""
        try:
            return record_from_row(type_name, version, data, payload)
        except (JbodError, ValueError, TypeError):
            return None


FrameBuilder = Callable[[Build], Frame]
