"""What the checks read: one cluster's tables through their Delta logs (:class:`TableSet`) and what comes from
outside the log (:class:`ExternalInputs`: meta.properties files, broker configs)."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa

from jbod_model.errors import InputError
from pipelines.lakehouse.tables import VERSIONED, history_table, query, read_table

#: The offsets :meth:`TableSet.records` reads at a time: about a million rows, a few hundred MB with their JSON.
RECORD_CHUNK_OFFSETS = 1_000_000


@dataclass(frozen=True, slots=True)
class ExternalInputs:
    """What I22/I24 need besides the tables: meta.properties files or folders (``--dirs``) and broker configs
    (``server.properties``, ``--broker-config``)."""

    dirs: tuple[Path, ...] = ()
    broker_configs: tuple[Path, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.dirs and not self.broker_configs


class TableSet:
    """One cluster's tables as pandas DataFrames, read lazily (once) through their Delta logs — or given directly,
    for tests that inject violations (:meth:`with_tables`)."""

    def __init__(self, cluster_id: str, tables_dir: str | Path | None = None,
                 frames: Mapping[str, pd.DataFrame] | None = None) -> None:
        self.cluster_id = cluster_id
        self.tables_dir = None if tables_dir is None else Path(tables_dir)
        self._frames: dict[str, pd.DataFrame] = dict(frames or {})
        self._injected = bool(frames)

    def table(self, name: str) -> pd.DataFrame:
        """The cluster's rows of ``name``. Read lazily, ``records`` leaves out its NoOpRecords (> 95 % of a real log;
        no rule reads them — only :meth:`clock` needs them, and reads its own columns); :meth:`load_all` keeps
        them. A history table comes ordered by key and start (:func:`~pipelines.lakehouse.tables.history_table`:
        the view's rows without its window functions, 5x cheaper on the millions of replica versions)."""
        if name not in self._frames:
            if self.tables_dir is None:
                raise InputError(f"table {name} was not given")
            if name in VERSIONED and not VERSIONED[name][1]:
                read = history_table(self.tables_dir, name, self.cluster_id)
            else:
                read = read_delta(self.tables_dir / name, self._filters(name))
            self._frames[name] = read.to_pandas()
        return self._frames[name]

    def lists_apart(self, name: str) -> tuple[pd.DataFrame, pa.Table | None]:
        """``name``'s rows for a reader that converts its list columns itself: as :meth:`table` gives them (and
        None) where the table is given or held; otherwise read now and not held here — its other columns in pandas,
        and the Arrow table read, lists and all. pandas makes a list cell a NumPy array: the 2 M partitions' seven
        list columns were 14 M of them, about 1.5 GB, only to be made tuples
        (:class:`pipelines.quality.frames.PartitionRows`)."""
        if name in self._frames or self.tables_dir is None or name not in _LISTS_APART:
            return self.table(name), None
        read = read_delta(self.tables_dir / name, self._filters(name))
        lists = [f.name for f in read.schema if pa.types.is_list(f.type) or pa.types.is_large_list(f.type)]
        return read.drop_columns(lists).to_pandas(), read

    def history(self, name: str, columns: Sequence[str], *, topics: Collection[str] | None = None,
                categories: Collection[str] = ()) -> pd.DataFrame:
        """A history table's rows as :meth:`table` gives them, only ``columns`` besides the key and the interval's
        offsets, and only ``topics``' (None: every topic's), pushed down to the read and not kept: at 2 M partitions
        ``replica_assignment_history`` holds 21 M versions, which every column of held in pandas took ~10 GB.
        ``categories``: string columns given as pandas categoricals (:func:`_lexical_categories`): those 21 M
        versions name a few thousand topics and a few hundred directories, a small code per cell."""
        entity = VERSIONED[name][0]
        wanted = [k for k, _ in entity.key] + [f"{c}_offset" for c in entity.interval]
        wanted += [c for c in columns if c not in wanted]
        if name in self._frames or self.tables_dir is None:
            frame = self.table(name)
            frame = (frame if topics is None else frame[frame["topic_id"].isin(list(topics))])[wanted]
            return _lexical_categories(frame.astype(dict.fromkeys(categories, "category")), categories)
        where = None if topics is None else f"topic_id IN ({', '.join(sorted(map(_sql_literal, topics))) or 'NULL'})"
        # Dictionary-encoded batch by batch as read: the texts are never held whole, nor become Python strings.
        read = history_table(self.tables_dir, name, self.cluster_id, wanted, where, encoded=categories).select(wanted)
        return _lexical_categories(read.to_pandas(categories=list(categories)), categories)

    def _filters(self, name: str) -> list[tuple[str, str, Any]]:
        """The cluster's rows of ``name`` as :meth:`table` reads them: ``records`` without its NoOpRecords."""
        filters: list[tuple[str, str, Any]] = [("cluster_id", "=", self.cluster_id)]
        if name == "records":
            filters.append(("type", "<>", "NO_OP_RECORD"))
        return filters

    def records(self, columns: Sequence[str], *, types: Collection[str] | None = None, snapshots: bool | None = None,
                applied: bool = False, chunk_offsets: int | None = None) -> Iterator[pd.DataFrame]:
        """The cluster's ``records`` rows as :meth:`table` gives them (NoOpRecords left out), only ``columns``, of
        ``types`` (None: every type) and of snapshots (True), of the log (False) or both (None), only those the
        replay applied (``applied``: ``applied_offset`` not null), in offset order (a snapshot's rows by their
        index), a range of ``chunk_offsets`` offsets at a time (default :data:`RECORD_CHUNK_OFFSETS`): a frame
        builder that goes through the log never holds it whole (11 M rows, with each record's JSON, at 2 M
        partitions). Given or loaded records come as one frame."""
        if "records" in self._frames or self.tables_dir is None:
            recs = self.table("records")
            recs = recs[recs["type"] != "NO_OP_RECORD"]  # whole when loaded (load_all)
            if types is not None:
                recs = recs[recs["type"].isin(list(types))]
            if snapshots is not None:
                recs = recs[(recs["origin"] == "snapshot") == snapshots]
            if applied:
                recs = recs[recs["applied_offset"].notna()]
            yield recs.sort_values(["offset", "snapshot_index"], kind="stable")[list(columns)]
            return
        where = " AND ".join(f'"{c}" {op} {_sql_literal(v)}' for c, op, v in self._filters("records"))
        if types is not None:
            where += f" AND type IN ({', '.join(sorted(map(_sql_literal, types)))})"
        if snapshots is not None:
            where += f" AND origin {'=' if snapshots else '<>'} 'snapshot'"
        if applied:
            # In the scan: pandas' filter of a million rows read was a copy of each of their columns.
            where += " AND applied_offset IS NOT NULL"
        span = query(self.tables_dir, "records", f'SELECT MIN("offset") AS lo, MAX("offset") AS hi FROM t '
                                                 f"WHERE {where}")
        lo, hi = span.column("lo")[0].as_py(), span.column("hi")[0].as_py()
        if lo is None:
            yield pd.DataFrame({c: [] for c in columns})
            return
        step = RECORD_CHUNK_OFFSETS if chunk_offsets is None else chunk_offsets
        select = ", ".join(f'"{c}"' for c in columns)
        for start in range(int(lo), int(hi) + 1, step):
            # Sorted by the query engine as it reads: Arrow's sort of the rows read took as long again as the read
            # (a take over every file's batch, the records' JSON included: 1.1 s a million rows at 200 k
            # partitions, docs/data-quality.md, "thirteenth round"). A cluster's rows are unique by offset and
            # snapshot index (a snapshot's rows share its offset), so the order is the one table() gives: nulls last,
            # a snapshot's rows before a log row at its offset.
            sql = (f'SELECT {select} FROM t WHERE {where} AND "offset" >= {start} AND "offset" < {start + step} '
                   f'ORDER BY "offset" ASC NULLS LAST, snapshot_index ASC NULLS LAST')
            yield _records_frame(query(self.tables_dir, "records", sql, views=True))

    def clock(self) -> tuple[int, int | None]:
        """The cluster's "now": the last offset that took effect, and its append time in ms (None without times).
        The I9/I12 thresholds are measured against it, as the model's tracker measures them."""
        # Given records (whole: load_all, with_tables) are the log; records read by table() lack the NoOpRecords.
        if self.tables_dir is None or (self._injected and "records" in self._frames):
            recs = self._frames.get("records", pd.DataFrame(columns=["offset", "applied_offset", "timestamp"]))
            applied = recs[recs["applied_offset"].notna()]
        else:
            # The greatest offset and time, one row: the same clock (a time in ms only grows with it), where the
            # three columns of every record, read for it, cost 0.3 s at 200 k partitions.
            applied = query(self.tables_dir, "records",
                            f'SELECT MAX("offset") AS "offset", MAX("timestamp") AS "timestamp" FROM t WHERE '
                            f'cluster_id = {_sql_literal(self.cluster_id)} AND applied_offset IS NOT NULL'
                            ).to_pandas().dropna(subset=["offset"])
        if applied.empty:
            return -1, None
        ms = to_ms(applied["timestamp"]).dropna()
        return int(applied["offset"].max()), (int(ms.max()) if not ms.empty else None)

    def record_rows(self) -> int:
        """How many rows :meth:`table` gives of ``records`` (NoOpRecords left out), without reading them all."""
        if "records" in self._frames or self.tables_dir is None:
            return len(self.table("records"))
        return int(read_delta(self.tables_dir / "records", self._filters("records"), columns=["offset"]).num_rows)

    @property
    def held(self) -> frozenset[str]:
        """The tables :meth:`table` holds now (read, or given)."""
        return frozenset(self._frames)

    def release_all_but(self, keep: Collection[str]) -> None:
        """Forget every table read through :meth:`table` but ``keep``: a later :meth:`table` reads it again. Given
        tables (:meth:`with_tables`, :meth:`load_all`) are kept, having nowhere to be read again from."""
        if not self._injected:
            for name in [n for n in self._frames if n not in keep]:
                del self._frames[name]

    @property
    def injected(self) -> bool:
        """Whether some table was given rather than read (:meth:`with_tables`, :meth:`load_all`): another process
        reading the directory would not see it."""
        return self._injected

    def with_tables(self, **tables: pd.DataFrame) -> TableSet:
        """A copy with some tables replaced (every other table read as before)."""
        return TableSet(self.cluster_id, self.tables_dir, {**self._frames, **tables})

    def load_all(self, names: Sequence[str]) -> TableSet:
        """Read ``names`` now, ``records`` whole (NoOps too, so the clock stays the log's after edits): for tests
        that edit tables before checking them."""
        self._injected = True  # the caller may edit them
        for name in names:
            if name == "records" and self.tables_dir is not None and name not in self._frames:
                self._frames[name] = read_delta(self.tables_dir / name,
                                                 [("cluster_id", "=", self.cluster_id)]).to_pandas()
            self.table(name)
        return self


#: The tables :meth:`TableSet.lists_apart` reads apart (a current table: one read, no history to derive).
_LISTS_APART = frozenset({"partitions"})


def _lexical_categories(frame: pd.DataFrame, columns: Collection[str]) -> pd.DataFrame:
    """``frame`` with its categorical ``columns``' categories in lexical order, so that sorting on their codes is
    sorting on their text (as on the strings they stand for)."""
    for c in columns:
        frame[c] = frame[c].cat.reorder_categories(sorted(frame[c].cat.categories))
    return frame


#: The ``records`` columns whose every cell is its own text (a record's JSON, a base64 body).
_UNIQUE_TEXTS = frozenset({"data", "payload"})


def _records_frame(read: pa.Table) -> pd.DataFrame:
    """``read`` as pandas, its :data:`_UNIQUE_TEXTS` made Python strings without ``to_pandas``' search for equal
    values (``deduplicate_objects``): it hashes every text, and no two records' JSON are alike — three quarters of
    the cost of a million records' JSON at 200 k partitions. The other texts (a type, an origin) keep it: a million
    cells share a few strings."""
    rest = read.drop_columns([n for n in read.column_names if n in _UNIQUE_TEXTS]).to_pandas()
    return pd.DataFrame({n: read.column(n).to_numpy(zero_copy_only=False) if n in _UNIQUE_TEXTS else rest[n]
                         for n in read.column_names}, copy=False)


def read_delta(path: Path, filters: list[tuple[str, str, Any]], columns: list[str] | None = None) -> pa.Table:
    """Live rows of a Delta table, through its log (delta-rs' SQL engine), with the table's own Arrow types
    (``pipelines.lakehouse.tables.read_table``: plain strings, which pandas and pyarrow's kernels take)."""
    where = " AND ".join(f'"{col}" {op} {_sql_literal(value)}' for col, op, value in filters)
    return read_table(path.parent, path.name, where or None, columns)


def _sql_literal(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(int(value))


def to_micros(series: pd.Series) -> pd.Series:
    """Timestamps as integer microseconds since the epoch (nullable)."""
    if series.empty:
        return pd.Series([], dtype="Int64", index=series.index)
    stamps = pd.to_datetime(series, utc=True)
    return ((stamps - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(microseconds=1)).astype("Int64")


def to_ms(series: pd.Series) -> pd.Series:
    """Table times (µs timestamps: ``records.timestamp``, the history and current tables' times) in ms."""
    return to_micros(series) // 1000
