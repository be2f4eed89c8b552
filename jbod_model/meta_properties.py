"""``meta.properties``: each log directory's identity file, and the checks Kafka runs over a node's set.

Mirrors ``org.apache.kafka.metadata.properties`` (``MetaProperties``, ``MetaProperties.Builder``,
``MetaPropertiesVersion``, ``MetaPropertiesEnsemble``, ``PropertiesUtils``) and the log-directory part of
``KafkaRaftServer.initializeLogDirs`` (Kafka 3.7+; formats reference §5). It is the only join key between the
directory UUIDs of the metadata log and the paths operators see.

Parsing follows Java's ``Properties.load`` exactly (comments, separators, escapes, line continuations),
because an operator may have edited the file by hand. Validation findings are returned as :class:`Finding`
values, never raised: a broken directory is something to report, not a reason to stop reading the others.

Kafka reads the file with ``Properties.load(InputStream)``, i.e. as ISO-8859-1, although it writes UTF-8
(``PropertiesUtils.writePropertiesFile``). :func:`read_file` decodes UTF-8 and falls back to ISO-8859-1, so a
non-ASCII ``cluster.id`` shows as written; only ASCII appears in practice.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import IntEnum, StrEnum
from pathlib import Path, PurePath, PurePosixPath
from typing import Final

from jbod_model.directory_id import is_reserved
from jbod_model.errors import InputError
from jbod_model.uuid import Uuid

#: ``MetaPropertiesEnsemble.META_PROPERTIES_NAME``.
META_PROPERTIES_NAME: Final = "meta.properties"
#: ``UnifiedLog.logDirName(__cluster_metadata-0)``: must only exist in the metadata log directory.
METADATA_PARTITION_DIR: Final = "__cluster_metadata-0"

VERSION_PROP: Final = "version"
CLUSTER_ID_PROP: Final = "cluster.id"
BROKER_ID_PROP: Final = "broker.id"
NODE_ID_PROP: Final = "node.id"
DIRECTORY_ID_PROP: Final = "directory.id"

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1


class MetaPropertiesError(InputError):
    """A ``meta.properties`` text that Kafka would refuse to load: a ``Properties.load`` syntax error or a
    ``MetaProperties.Builder`` rule (version, node.id, cluster.id, directory.id). ``message`` is Kafka's text.
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        self.message = message
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


class MetaPropertiesVersion(IntEnum):
    """Mirrors ``MetaPropertiesVersion`` as shipped in Kafka 3.7–4.x: v0 (ZooKeeper era, ``broker.id``) and v1
    (KRaft, ``node.id`` and ``cluster.id`` required). A later trunk revision adds a v2; it is not accepted
    here, exactly as released brokers refuse it."""

    V0 = 0
    V1 = 1

    @classmethod
    def from_number_string(cls, text: str) -> MetaPropertiesVersion:
        """Mirrors ``MetaPropertiesVersion.fromNumberString``: Java-trimmed, base-10, then 0 or 1."""
        number = _parse_java_int(_java_trim(text))
        if number is None:
            raise MetaPropertiesError(f"Invalid meta.properties version string '{text}'")
        try:
            return cls(number)
        except ValueError:
            raise MetaPropertiesError(f"Unknown meta.properties version number {number}") from None

    @property
    def has_broker_id(self) -> bool:
        """v0 calls the node id ``broker.id``."""
        return self is MetaPropertiesVersion.V0

    @property
    def always_has_node_id(self) -> bool:
        return self is not MetaPropertiesVersion.V0

    @property
    def always_has_cluster_id(self) -> bool:
        return self is MetaPropertiesVersion.V1


def _java_trim(text: str) -> str:
    # String.trim strips every char <= U+0020, not just whitespace.
    return text.strip("".join(chr(c) for c in range(0x21)))


def _parse_java_int(text: str) -> int | None:
    """``Integer.parseInt``: optional sign, ASCII digits, 32-bit range; no spaces or underscores (unlike
    int())."""
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    value = int(text)
    return value if _INT32_MIN <= value <= _INT32_MAX else None


def _required_int(props: Mapping[str, str], key: str) -> int:
    """Mirrors ``PropertiesUtils.loadRequiredIntProp``."""
    value = props.get(key)
    if value is None:
        raise MetaPropertiesError(f"Failed to find {key}")
    number = _parse_java_int(value)
    if number is None:
        raise MetaPropertiesError(f"Unable to read {key} as a base-10 number.")
    return number


@dataclass(frozen=True, slots=True)
class MetaProperties:
    """The content of one ``meta.properties`` (Kafka's ``MetaProperties``).

    ``node_id`` is ``node.id`` in v1 and ``broker.id`` in v0. ``cluster_id`` is free text: Kafka never checks
    it is a Uuid (real files hold ``ksddns,sdsjswnd,dnjsd``). Construction applies
    ``MetaProperties.Builder.build``: a v1 file must have both a cluster id and a node id.
    """

    version: MetaPropertiesVersion
    cluster_id: str | None = None
    node_id: int | None = None
    directory_id: Uuid | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.version, MetaPropertiesVersion):
            object.__setattr__(self, "version", MetaPropertiesVersion(self.version))
        if self.version is not MetaPropertiesVersion.V0:
            if self.cluster_id is None:
                raise MetaPropertiesError("cluster.id was not found.")
            if self.node_id is None:
                raise MetaPropertiesError("node.id was not found.")

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> MetaProperties:
        """Mirrors ``new MetaProperties.Builder(Properties).build()``, in Kafka's order of checks: version,
        node id, directory id, then the cluster id required by ``build``."""
        version = MetaPropertiesVersion.from_number_string(props.get(VERSION_PROP, "0"))
        node_id: int | None = None
        if version.has_broker_id:
            if BROKER_ID_PROP in props:
                node_id = _required_int(props, BROKER_ID_PROP)
        else:
            node_id = _required_int(props, NODE_ID_PROP)
        directory_id: Uuid | None = None
        if DIRECTORY_ID_PROP in props:
            try:
                directory_id = Uuid.from_string(props[DIRECTORY_ID_PROP])
            except InputError as e:
                raise MetaPropertiesError(f"Unable to read {DIRECTORY_ID_PROP} as a Uuid: {e}") from e
        return cls(version=version, cluster_id=props.get(CLUSTER_ID_PROP), node_id=node_id,
                   directory_id=directory_id)

    def to_properties(self) -> dict[str, str]:
        """Mirrors ``MetaProperties.toProperties``: ``version`` always, the rest when present."""
        props = {VERSION_PROP: str(int(self.version))}
        if self.cluster_id is not None:
            props[CLUSTER_ID_PROP] = self.cluster_id
        if self.node_id is not None:
            props[BROKER_ID_PROP if self.version.has_broker_id else NODE_ID_PROP] = str(self.node_id)
        if self.directory_id is not None:
            props[DIRECTORY_ID_PROP] = str(self.directory_id)
        return props


# ------------------------------------------------------------------------------------------------------------
# java.util.Properties text format

_PROPS_WHITESPACE: Final = " \t\f"
_LOAD_ESCAPES: Final = {"t": "\t", "r": "\r", "n": "\n", "f": "\f"}
_STORE_ESCAPES: Final = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f",
                         "=": "\\=", ":": "\\:", "#": "\\#", "!": "\\!"}


def _logical_lines(text: str) -> Iterator[str]:
    """``Properties.LineReader``: skips blank and comment lines, joins continuations, trims leading blanks."""
    natural = re.split(r"\r\n|\r|\n", text)
    i = 0
    while i < len(natural):
        line = natural[i].lstrip(_PROPS_WHITESPACE)
        i += 1
        # A comment is recognised only at the start of a logical line, so "#" on a continuation line is data.
        if not line or line[0] in "#!":
            continue
        parts: list[str] = []
        # An odd number of trailing backslashes escapes the line break; an even number is literal backslashes.
        while (len(line) - len(line.rstrip("\\"))) % 2 == 1:
            parts.append(line[:-1])
            if i >= len(natural):
                line = ""  # Java drops a dangling continuation at end of input.
                break
            line = natural[i].lstrip(_PROPS_WHITESPACE)
            i += 1
        parts.append(line)
        yield "".join(parts)


def _load_convert(text: str) -> str:
    """``Properties.loadConvert``: ``\\uXXXX``, ``\\t \\r \\n \\f``, and ``\\c`` → ``c`` for any other c."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        i += 1
        if ch != "\\" or i >= n:
            out.append(ch)
            continue
        ch = text[i]
        i += 1
        if ch == "u":
            digits = text[i:i + 4]
            if len(digits) < 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise MetaPropertiesError("Malformed \\uxxxx encoding.")
            out.append(chr(int(digits, 16)))
            i += 4
        else:
            out.append(_LOAD_ESCAPES.get(ch, ch))
    return "".join(out)


def _split_key_value(line: str) -> tuple[str, str]:
    """The key ends at the first unescaped ``=``, ``:`` or whitespace; one ``=``/``:`` and the whitespace
    around it are the separator."""
    n = len(line)
    key_end, value_start, has_separator, backslash = n, n, False, False
    for i, ch in enumerate(line):
        if not backslash and ch in "=:":
            key_end, value_start, has_separator = i, i + 1, True
            break
        if not backslash and ch in _PROPS_WHITESPACE:
            key_end, value_start = i, i + 1
            break
        backslash = ch == "\\" and not backslash
    while value_start < n:
        ch = line[value_start]
        if ch in _PROPS_WHITESPACE:
            value_start += 1
        elif not has_separator and ch in "=:":
            has_separator = True
            value_start += 1
        else:
            break
    return _load_convert(line[:key_end]), _load_convert(line[value_start:])


def load_properties(text: str) -> dict[str, str]:
    """Mirrors ``java.util.Properties.load``: key/value pairs in file order, the last of a repeated key wins.

    Raises :class:`MetaPropertiesError` on a malformed ``\\uXXXX`` escape, as Java does.
    """
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split_key_value(line)
        props.pop(key, None)  # keep file order of the last occurrence
        props[key] = value
    return props


def _save_convert(text: str, *, is_key: bool) -> str:
    """``Properties.saveConvert`` as used by ``store(Writer)``: no ``\\uXXXX`` escaping (PropertiesUtils
    writes UTF-8), every space escaped in a key, only a leading space in a value."""
    out: list[str] = []
    for i, ch in enumerate(text):
        if ch == " " and (is_key or i == 0):
            out.append("\\ ")
        else:
            out.append(_STORE_ESCAPES.get(ch, ch))
    return "".join(out)


_DAYS: Final = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS: Final = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def java_date_string(when: datetime) -> str:
    """``java.util.Date.toString``: ``EEE MMM dd HH:mm:ss zzz yyyy`` in English.

    ``Fri Feb 07 06:03:45 UTC 2025``: a naive datetime is taken as UTC; the zone abbreviation is ``tzname()``.
    """
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    zone = when.tzname() or "UTC"
    return (f"{_DAYS[when.weekday()]} {_MONTHS[when.month - 1]} {when.day:02d} "
            f"{when.hour:02d}:{when.minute:02d}:{when.second:02d} {zone} {when.year}")


def store_properties(props: Mapping[str, str], *, comments: str = "", date: datetime | None = None) -> str:
    """Mirrors ``Properties.store(Writer, comments)`` on JDK 18+: ``#comments`` (one ``#`` line per line), a
    ``#<date>`` line, then ``key=value`` lines sorted by key. Older JDKs wrote hash order, which is why both
    orders exist on disk."""
    lines = [f"#{line}" for line in (comments.split("\n") if comments else [""])]
    lines.append(f"#{java_date_string(date if date is not None else datetime.now(UTC))}")
    lines += [f"{_save_convert(key, is_key=True)}={_save_convert(value, is_key=False)}"
              for key, value in sorted(props.items())]
    return "\n".join(lines) + "\n"


def parse(text: str, *, path: str | None = None) -> MetaProperties:
    """Parse a ``meta.properties`` text (``PropertiesUtils.readPropertiesFile`` + ``MetaProperties.Builder``).

    Raises :class:`MetaPropertiesError` with Kafka's message, naming ``path`` when given.
    """
    try:
        return MetaProperties.from_properties(load_properties(text))
    except MetaPropertiesError as e:
        raise MetaPropertiesError(e.message, path=path) from None


def to_text(meta: MetaProperties, *, date: datetime | None = None) -> str:
    """The file Kafka writes for ``meta`` (``PropertiesUtils.writePropertiesFile``: ``store(writer, "")``).
    ``date`` fixes the ``#<date>`` line (default: now, UTC)."""
    return store_properties(meta.to_properties(), date=date)


def read_file(path: str | os.PathLike[str]) -> MetaProperties:
    """Read and parse one ``meta.properties`` file (UTF-8, falling back to ISO-8859-1 as Kafka's reader uses).

    Raises ``OSError`` (``FileNotFoundError`` when missing) or :class:`MetaPropertiesError`.
    """
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return parse(text, path=os.fspath(path))


# ------------------------------------------------------------------------------------------------------------
# Ensemble: the log directories of one node


class Severity(StrEnum):
    """How bad a finding is: ``error`` stops Kafka (or takes the directory offline), ``warning`` does not."""

    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, slots=True)
class Finding:
    """One validation result. ``path`` is the log directory concerned, ``None`` for a node-wide finding."""

    severity: Severity
    path: str | None
    message: str


class LogDirState(StrEnum):
    """How ``MetaPropertiesEnsemble.Loader`` classified a log directory."""

    #: ``meta.properties`` read and valid (``logDirProps``).
    LOADED = "loaded"
    #: No ``meta.properties`` (``emptyLogDirs``): an unformatted directory.
    EMPTY = "empty"
    #: ``meta.properties`` present but unreadable or invalid (``errorLogDirs``).
    ERROR = "error"


class VerificationFlag(StrEnum):
    """Mirrors ``MetaPropertiesEnsemble.VerificationFlag``."""

    REQUIRE_V0 = "REQUIRE_V0"
    REQUIRE_METADATA_LOG_DIR = "REQUIRE_METADATA_LOG_DIR"
    REQUIRE_AT_LEAST_ONE_VALID = "REQUIRE_AT_LEAST_ONE_VALID"


#: The flags ``KafkaRaftServer.initializeLogDirs`` verifies with.
KRAFT_STARTUP_FLAGS: Final = frozenset(
    {VerificationFlag.REQUIRE_AT_LEAST_ONE_VALID, VerificationFlag.REQUIRE_METADATA_LOG_DIR}
)


@dataclass(frozen=True, slots=True)
class LoadedLogDir:
    """One log directory as the loader saw it; ``error`` is the reason for :attr:`LogDirState.ERROR`."""

    path: str
    state: LogDirState
    properties: MetaProperties | None = None
    error: str | None = None
    #: ``__cluster_metadata-0`` exists inside the directory.
    has_metadata_partition: bool = False


def _meta_path(log_dir: str) -> str:
    return os.path.join(log_dir, META_PROPERTIES_NAME)


def load_log_dir(path: str | os.PathLike[str]) -> LoadedLogDir:
    """Mirrors one iteration of ``MetaPropertiesEnsemble.Loader.load``: a missing file makes the directory
    EMPTY, any other read or parse failure makes it ERROR."""
    log_dir = os.fspath(path)
    has_metadata = (Path(log_dir) / METADATA_PARTITION_DIR).is_dir()
    try:
        props = read_file(_meta_path(log_dir))
    except FileNotFoundError:
        return LoadedLogDir(log_dir, LogDirState.EMPTY, has_metadata_partition=has_metadata)
    except (OSError, MetaPropertiesError) as e:
        reason = e.message if isinstance(e, MetaPropertiesError) else str(e)
        return LoadedLogDir(log_dir, LogDirState.ERROR, error=reason, has_metadata_partition=has_metadata)
    return LoadedLogDir(log_dir, LogDirState.LOADED, properties=props, has_metadata_partition=has_metadata)


@dataclass(frozen=True, slots=True)
class MetaPropertiesEnsemble:
    """The ``meta.properties`` of one node's log directories (``MetaPropertiesEnsemble``), keyed by path in
    Kafka's order (a ``TreeMap``: plain string order)."""

    log_dirs: tuple[LoadedLogDir, ...]
    metadata_log_dir: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "log_dirs", tuple(sorted(self.log_dirs, key=lambda d: d.path)))

    @classmethod
    def load(cls, log_dirs: Iterable[str | os.PathLike[str]], *,
             metadata_log_dir: str | os.PathLike[str] | None = None) -> MetaPropertiesEnsemble:
        """Mirrors ``MetaPropertiesEnsemble.Loader`` (``addLogDirs``, ``addMetadataLogDir``, ``load``)."""
        paths = {os.fspath(p) for p in log_dirs}
        meta_dir = os.fspath(metadata_log_dir) if metadata_log_dir is not None else None
        if meta_dir is not None:
            paths.add(meta_dir)
        if not paths:
            raise InputError("You must specify at least one log directory.")
        return cls(tuple(load_log_dir(p) for p in sorted(paths)), metadata_log_dir=meta_dir)

    @property
    def loaded(self) -> tuple[LoadedLogDir, ...]:
        """Directories with a valid ``meta.properties`` (``logDirProps``)."""
        return tuple(d for d in self.log_dirs if d.state is LogDirState.LOADED)

    def node_id(self) -> int | None:
        """Mirrors ``MetaPropertiesEnsemble.nodeId``: the first node id found, in path order."""
        return next((d.properties.node_id for d in self.loaded
                     if d.properties is not None and d.properties.node_id is not None), None)

    def cluster_id(self) -> str | None:
        """Mirrors ``MetaPropertiesEnsemble.clusterId``: the first cluster id found, in path order."""
        return next((d.properties.cluster_id for d in self.loaded
                     if d.properties is not None and d.properties.cluster_id is not None), None)

    def verify(self, *, expected_cluster_id: str | None = None, expected_node_id: int | None = None,
               flags: Iterable[VerificationFlag] = (VerificationFlag.REQUIRE_AT_LEAST_ONE_VALID,)
               ) -> list[Finding]:
        """Mirrors ``MetaPropertiesEnsemble.verify``, with Kafka's messages, but reports every failure as an
        error finding instead of throwing at the first one. Unreadable directories are reported too (Kafka
        logs them and takes them offline)."""
        flag_set = frozenset(flags)
        findings: list[Finding] = []

        def error(path: str | None, message: str) -> None:
            findings.append(Finding(Severity.ERROR, path, message))

        for d in self.log_dirs:
            if d.state is LogDirState.ERROR:
                error(d.path, f"Error while reading meta.properties file {_meta_path(d.path)}: {d.error}")
        if VerificationFlag.REQUIRE_AT_LEAST_ONE_VALID in flag_set and not self.loaded:
            error(None, "No readable meta.properties files found.")
        seen_ids: dict[Uuid, str] = {}
        cluster_id, node_id = expected_cluster_id, expected_node_id
        for d in self.loaded:
            assert d.properties is not None
            meta, path = d.properties, _meta_path(d.path)
            if VerificationFlag.REQUIRE_V0 in flag_set and meta.version is not MetaPropertiesVersion.V0:
                error(d.path, f"Found unexpected version in {path}. ZK-based brokers that are not "
                              "migrating only support version 0 (which is implicit when the `version` field "
                              "is missing).")
            # MetaProperties makes v1 files carry cluster.id and node.id, so only v0 files can lack them.
            if meta.cluster_id is not None:
                if cluster_id is None:
                    cluster_id = meta.cluster_id
                elif meta.cluster_id != cluster_id:
                    error(d.path, f"Invalid cluster.id in: {path}. Expected {cluster_id}, "
                                  f"but read {meta.cluster_id}")
            if meta.node_id is not None:
                if node_id is None:
                    node_id = meta.node_id
                elif meta.node_id != node_id:
                    error(d.path, f"Stored node id {meta.node_id} doesn't match previous node id {node_id} "
                                  f"in {path}. If you moved your data, make sure your configured node id "
                                  "matches. If you intend to create a new node, you should remove all data "
                                  "in your data directories.")
            if meta.directory_id is not None:
                if is_reserved(meta.directory_id):
                    # Kafka's message, typo included, so it can be grepped for in broker logs.
                    error(d.path, f"Invalid resrved directory ID {meta.directory_id} found in {d.path}")
                previous = seen_ids.setdefault(meta.directory_id, d.path)
                if previous != d.path:
                    # Kafka prints the Optional itself here ("Optional[...]"); kept for the same reason.
                    error(d.path, f"Duplicate directory ID Optional[{meta.directory_id}] found. It was the "
                                  f"ID of {previous}, but also of {d.path}")
        meta_dir = self.metadata_log_dir
        if VerificationFlag.REQUIRE_METADATA_LOG_DIR in flag_set and meta_dir is None:
            error(None, "No metadata log directory was specified.")
        if meta_dir is not None and any(d.path == meta_dir and d.state is LogDirState.ERROR
                                        for d in self.log_dirs):
            error(meta_dir, f"Encountered I/O error in metadata log directory {meta_dir}. Cannot continue.")
        return findings

    def startup_findings(self) -> list[Finding]:
        """Mirrors the per-directory checks of ``KafkaRaftServer.initializeLogDirs`` after ``verify``: every
        non-failed directory must be formatted and have a node id and a cluster id; a directory without
        ``directory.id`` is a warning, because the broker generates one and rewrites the file at startup."""
        findings: list[Finding] = []
        meta_dir = self.metadata_log_dir
        for d in self.log_dirs:
            if d.has_metadata_partition and meta_dir is not None and d.path != meta_dir:
                location = os.path.join(d.path, METADATA_PARTITION_DIR)
                findings.append(Finding(Severity.ERROR, d.path, f"Found unexpected metadata location in data "
                                        f"directory `{location}` (the configured metadata directory is "
                                        f"{meta_dir})."))
            if d.state is LogDirState.EMPTY:
                findings.append(Finding(Severity.ERROR, d.path, f"No `meta.properties` found in {d.path} "
                                        "(have you run `kafka-storage.sh` to format the directory?)"))
            if d.state is not LogDirState.LOADED or d.properties is None:
                continue
            if d.properties.node_id is None:
                findings.append(Finding(Severity.ERROR, d.path, f"Error: node ID not found in {d.path}"))
            if d.properties.cluster_id is None:
                findings.append(Finding(Severity.ERROR, d.path, f"Error: cluster ID not found in {d.path}"))
            if d.properties.directory_id is None:
                findings.append(Finding(Severity.WARNING, d.path, f"No directory.id in {_meta_path(d.path)}: "
                                        "Kafka generates a random one and rewrites the file at startup "
                                        "(KIP-858), so the id the metadata log will use is not known yet"))
        return findings


def verify_log_dirs(log_dirs: Iterable[str | os.PathLike[str]], *, expected_node_id: int | None = None,
                    expected_cluster_id: str | None = None,
                    metadata_log_dir: str | os.PathLike[str] | None = None) -> list[Finding]:
    """All findings for one node's log directories, as KRaft startup sees them (``KafkaRaftServer.
    initializeLogDirs``: ``verify`` with REQUIRE_AT_LEAST_ONE_VALID, then the per-directory rules).

    REQUIRE_METADATA_LOG_DIR and the metadata-partition placement check apply only when ``metadata_log_dir``
    is given: offline, the configuration is usually unknown.
    """
    ensemble = MetaPropertiesEnsemble.load(log_dirs, metadata_log_dir=metadata_log_dir)
    flags = (KRAFT_STARTUP_FLAGS if metadata_log_dir is not None
             else frozenset({VerificationFlag.REQUIRE_AT_LEAST_ONE_VALID}))
    return (ensemble.verify(expected_cluster_id=expected_cluster_id, expected_node_id=expected_node_id,
                            flags=flags)
            + ensemble.startup_findings())


# ------------------------------------------------------------------------------------------------------------
# Inventory: many nodes' log directories at once


@dataclass(frozen=True, slots=True)
class DirInventoryRow:
    """One formatted log directory: the join key between a path on a node and a directory Uuid in the log."""

    node_id: int | None
    path: str
    directory_id: Uuid | None
    cluster_id: str | None
    version: int
    #: Where the ``meta.properties`` was read when that is not ``path``: a copy of the broker's filesystem
    #: (``inventory(..., as_root=True)``). None when ``path`` is where it was read.
    read_from: str | None = None


@dataclass(frozen=True, slots=True)
class DirInventory:
    """Rows sorted by (node id, path) and findings grouped by node id (``None``: node unknown)."""

    rows: tuple[DirInventoryRow, ...]
    findings: Mapping[int | None, tuple[Finding, ...]] = field(default_factory=dict)

    @property
    def all_findings(self) -> tuple[Finding, ...]:
        """Every finding, nodes in id order (unknown node last)."""
        return tuple(f for group in self.findings.values() for f in group)

    @property
    def ok(self) -> bool:
        """No errors (warnings allowed)."""
        return all(f.severity is not Severity.ERROR for f in self.all_findings)


def path_on_node(log_dir: str | os.PathLike[str], root: str | os.PathLike[str]) -> str:
    """The path a log directory has on its broker, read from a copy of that broker's filesystem: ``log_dir``
    relative to ``root`` (the copy's top, e.g. what ``rsync broker-3:/ /collected/b3`` wrote), made absolute.
    ``/collected/b3/mnt/d2`` under ``/collected/b3`` is ``/mnt/d2``; the root itself is ``/``.

    Paths are compared as written (no symlinks followed, no file system access), so give both the same way.
    Raises :class:`InputError` when ``log_dir`` is not under ``root``.
    """
    here, top = PurePath(os.path.normpath(os.fspath(log_dir))), PurePath(os.path.normpath(os.fspath(root)))
    try:
        rel = here.relative_to(top)
    except ValueError:
        raise InputError(f"{os.fspath(log_dir)} is not under {os.fspath(root)}") from None
    # The broker's paths are POSIX (Kafka's log.dirs on Linux), whatever separator this machine uses.
    return str(PurePosixPath("/", *rel.parts))


def _find_log_dirs(paths: Iterable[str | os.PathLike[str]], *, as_root: bool = False,
                   ) -> tuple[list[str], list[Finding], dict[str, str]]:
    """Resolve inputs to log directories: a file names its directory, a directory holding ``meta.properties``
    is one, any other directory is searched recursively (without descending into log directories found).

    With ``as_root`` every input is a copy of one broker's filesystem root: it must be a directory, and the
    third value maps each log directory found to its path on the broker (:func:`path_on_node`; the first
    input that holds it wins)."""
    found: list[str] = []
    problems: list[Finding] = []
    on_node: dict[str, str] = {}
    for raw in paths:
        path = Path(raw)
        if as_root and not path.is_dir():
            what = "does not exist" if not path.exists() else "is not a directory (a broker's root copy is one)"
            problems.append(Finding(Severity.ERROR, os.fspath(path), f"{os.fspath(path)} {what}"))
            continue
        if path.is_file():
            here = [os.fspath(path.parent)]
        elif (path / META_PROPERTIES_NAME).is_file():
            here = [os.fspath(path)]
        elif path.is_dir():
            nested: list[str] = []
            for root, dirs, files in os.walk(path):
                if META_PROPERTIES_NAME in files:
                    nested.append(root)
                    dirs.clear()  # a log directory's partitions never hold another meta.properties
                else:
                    dirs.sort()
            # No meta.properties anywhere below: take the directory itself as an unformatted log directory.
            here = nested or [os.fspath(path)]
        else:
            problems.append(Finding(Severity.ERROR, os.fspath(path), f"{os.fspath(path)} does not exist"))
            continue
        found += here
        if as_root:
            for log_dir in here:
                on_node.setdefault(log_dir, path_on_node(log_dir, path))
    return sorted(set(found)), problems, on_node


def _guess_node_id(log_dir: str) -> int | None:
    """The node id of an invalid file when its node.id/broker.id line is still readable, to group its finding.
    """
    try:
        text = (Path(log_dir) / META_PROPERTIES_NAME).read_text(encoding="latin-1")
        props = load_properties(text)
    except (OSError, MetaPropertiesError):
        return None
    for key in (NODE_ID_PROP, BROKER_ID_PROP):
        if key in props and (value := _parse_java_int(props[key])) is not None:
            return value
    return None


def _node_key(node_id: int | None) -> tuple[int, int]:
    return (1, 0) if node_id is None else (0, node_id)


def inventory(paths: Iterable[str | os.PathLike[str]], *, as_root: bool = False) -> DirInventory:
    """Inventory of log directories for any number of nodes: rows for every valid ``meta.properties`` and, per
    node id, the findings of :func:`verify_log_dirs` over that node's directories. A directory id seen on two
    different nodes is an error on both (``MetaPropertiesEnsemble.verify`` only catches it within one node).

    ``paths`` may name ``meta.properties`` files, log directories, or parent folders searched recursively.
    Pass one cluster at a time: grouping is by node id alone, so node 1 of two clusters reads as one node
    whose directories disagree on ``cluster.id`` (which is what Kafka would report for such a broker).

    With ``as_root`` each path is a copy of one broker's filesystem root (collected with rsync, say): rows and
    findings name every directory by its path on the broker (:func:`path_on_node`, ``/mnt/d2``), and
    :attr:`DirInventoryRow.read_from` keeps where its file was read. Findings' messages still quote the files
    read.
    """
    log_dirs, findings_unknown, on_node = _find_log_dirs(paths, as_root=as_root)
    by_node: dict[int | None, list[LoadedLogDir]] = {}
    for d in (load_log_dir(p) for p in log_dirs):
        node = d.properties.node_id if d.properties is not None else (
            _guess_node_id(d.path) if d.state is LogDirState.ERROR else None)
        by_node.setdefault(node, []).append(d)

    findings: dict[int | None, list[Finding]] = {None: findings_unknown}
    rows: list[DirInventoryRow] = []
    for node, dirs in by_node.items():
        ensemble = MetaPropertiesEnsemble(tuple(dirs))
        # Directories of no known node have nothing readable by definition; saying so again adds nothing.
        flags = () if node is None else (VerificationFlag.REQUIRE_AT_LEAST_ONE_VALID,)
        findings.setdefault(node, []).extend(ensemble.verify(flags=flags) + ensemble.startup_findings())
        rows += [DirInventoryRow(node_id=node, path=d.path, directory_id=d.properties.directory_id,
                                 cluster_id=d.properties.cluster_id, version=int(d.properties.version))
                 for d in ensemble.loaded if d.properties is not None]

    owners: dict[Uuid, dict[int | None, list[str]]] = {}
    for row in rows:
        if row.directory_id is not None:
            owners.setdefault(row.directory_id, {}).setdefault(row.node_id, []).append(row.path)
    for directory_id, nodes in owners.items():
        if len(nodes) < 2:
            continue
        where = ", ".join(f"node {n} ({', '.join(nodes[n])})" for n in sorted(nodes, key=_node_key))
        for node, node_paths in nodes.items():
            for p in node_paths:
                findings.setdefault(node, []).append(Finding(
                    Severity.ERROR, p, f"Directory ID {directory_id} is used by more than one node: {where}"))

    if on_node:
        rows = [replace(r, path=on_node.get(r.path, r.path), read_from=r.path) for r in rows]
        findings = {node: [replace(f, path=on_node.get(f.path, f.path)) if f.path is not None else f
                           for f in group] for node, group in findings.items()}
    rows.sort(key=lambda r: (_node_key(r.node_id), r.path))
    grouped = {node: tuple(findings[node]) for node in sorted(findings, key=_node_key) if findings[node]}
    return DirInventory(rows=tuple(rows), findings=grouped)
