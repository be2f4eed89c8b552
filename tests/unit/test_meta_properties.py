"""meta.properties: Properties.load/store, MetaProperties rules, ensemble checks, inventory (reference §5)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jbod_model import meta_properties as mp
from jbod_model.errors import InputError
from jbod_model.meta_properties import (
    KRAFT_STARTUP_FLAGS,
    DirInventoryRow,
    Finding,
    LogDirState,
    MetaProperties,
    MetaPropertiesEnsemble,
    MetaPropertiesError,
    MetaPropertiesVersion,
    Severity,
    VerificationFlag,
)
from jbod_model.uuid import Uuid

V0, V1 = MetaPropertiesVersion.V0, MetaPropertiesVersion.V1
DIR_A, DIR_B = "h6pDfZcK7RCGV0SBTRYdAA", "Teb3PFb009qvAZgMDEFH4g"
CLUSTER = "EpwKlK0lR6qKZW0cGwZz8w"

# ------------------------------------------------------------------------------------------------------------
# Real files


REAL = {
    "greenlemont-3node-kafka3.5/data/kafka1": (1, CLUSTER, None),
    "greenlemont-3node-kafka3.5/data/kafka2": (2, CLUSTER, None),
    "greenlemont-3node-kafka3.5/data/kafka3": (3, CLUSTER, None),
    "otus-kafka-kafka3.8/data": (1, "ksddns,sdsjswnd,dnjsd", DIR_A),
    "indus-local-test-rig-kafka4.2/kafka-data": (1, "5L6g3nShT-eMCtK--X86sw", DIR_B),
}


@pytest.mark.samples
@pytest.mark.parametrize("log_dir", sorted(REAL))
def test_every_real_meta_properties(samples_dir: Path, log_dir: str) -> None:
    node_id, cluster_id, directory_id = REAL[log_dir]
    meta = mp.read_file(samples_dir / log_dir / "meta.properties")
    assert meta == MetaProperties(version=V1, cluster_id=cluster_id, node_id=node_id,
                                  directory_id=Uuid.from_string(directory_id) if directory_id else None)
    assert mp.parse(mp.to_text(meta)) == meta


@pytest.mark.samples
def test_real_files_show_both_key_orders(samples_dir: Path) -> None:
    cp_kafka = (samples_dir / "otus-kafka-kafka3.8/data/meta.properties").read_text()
    apache = (samples_dir / "indus-local-test-rig-kafka4.2/kafka-data/meta.properties").read_text()
    assert list(mp.load_properties(cp_kafka)) == ["node.id", "directory.id", "version", "cluster.id"]
    assert list(mp.load_properties(apache)) == ["cluster.id", "directory.id", "node.id", "version"]
    assert mp.parse(cp_kafka) == MetaProperties(V1, "ksddns,sdsjswnd,dnjsd", 1, Uuid.from_string(DIR_A))


@pytest.mark.samples
def test_writer_reproduces_a_real_file_byte_for_byte(samples_dir: Path) -> None:
    path = samples_dir / "indus-local-test-rig-kafka4.2/kafka-data/meta.properties"
    written = mp.to_text(mp.read_file(path), date=datetime(2026, 4, 6, 10, 27, 56,
                                                            tzinfo=timezone(timedelta(0), "GMT")))
    assert written == path.read_text()


@pytest.mark.samples
def test_real_log_dirs_verify(samples_dir: Path) -> None:
    indus = samples_dir / "indus-local-test-rig-kafka4.2/kafka-data"
    assert mp.verify_log_dirs([indus], metadata_log_dir=indus, expected_node_id=1) == []
    assert mp.verify_log_dirs([samples_dir / "otus-kafka-kafka3.8/data"]) == []
    # 3.5 predates KIP-858: no directory.id yet; a 3.7+ broker would generate one at startup.
    kafka1 = samples_dir / "greenlemont-3node-kafka3.5/data/kafka1"
    (warning,) = mp.verify_log_dirs([kafka1])
    assert (warning.severity, warning.path) == (Severity.WARNING, str(kafka1))
    assert warning.message.startswith(f"No directory.id in {kafka1}/meta.properties")


@pytest.mark.samples
def test_real_three_node_cluster_inventory(samples_dir: Path) -> None:
    inv = mp.inventory([samples_dir / "greenlemont-3node-kafka3.5"])
    base = samples_dir / "greenlemont-3node-kafka3.5/data"
    assert inv.rows == tuple(DirInventoryRow(node_id=n, path=str(base / f"kafka{n}"), directory_id=None,
                                             cluster_id=CLUSTER, version=1) for n in (1, 2, 3))
    assert {node: [f.severity for f in group] for node, group in inv.findings.items()} == {
        1: [Severity.WARNING], 2: [Severity.WARNING], 3: [Severity.WARNING]}
    assert inv.ok


@pytest.mark.samples
def test_real_inventory_of_every_sample(samples_dir: Path) -> None:
    inv = mp.inventory([samples_dir])
    assert [(r.node_id, Path(r.path).relative_to(samples_dir).as_posix()) for r in inv.rows] == [
        (1, "greenlemont-3node-kafka3.5/data/kafka1"),
        (1, "indus-local-test-rig-kafka4.2/kafka-data"),
        (1, "otus-kafka-kafka3.8/data"),
        (2, "greenlemont-3node-kafka3.5/data/kafka2"),
        (3, "greenlemont-3node-kafka3.5/data/kafka3"),
    ]
    assert [r.directory_id for r in inv.rows if r.directory_id] == [Uuid.from_string(DIR_B),
                                                                    Uuid.from_string(DIR_A)]
    # Three clusters each have a node 1: grouped by node id they read as one node with foreign cluster ids,
    # exactly what Kafka would say if those directories were configured on one broker.
    errors = [f.message for f in inv.findings[1] if f.severity is Severity.ERROR]
    assert len(errors) == 2
    assert all(m.startswith("Invalid cluster.id in: ") and f"Expected {CLUSTER}" in m for m in errors)


@pytest.mark.samples
def test_inventory_accepts_files_and_log_dirs(samples_dir: Path) -> None:
    otus = samples_dir / "otus-kafka-kafka3.8/data"
    inv = mp.inventory([otus / "meta.properties", otus])
    assert [r.path for r in inv.rows] == [str(otus)]
    assert inv.findings == {}


# ------------------------------------------------------------------------------------------------------------
# java.util.Properties.load


@pytest.mark.parametrize(("text", "expected"), [
    ("a=b", {"a": "b"}),
    ("a = b", {"a": "b"}),
    ("a:b", {"a": "b"}),
    ("a : b", {"a": "b"}),
    ("a b", {"a": "b"}),
    ("a\tb", {"a": "b"}),
    ("a\fb", {"a": "b"}),
    ("   a=b", {"a": "b"}),
    ("a=b  ", {"a": "b  "}),  # trailing whitespace is part of the value
    ("a==b", {"a": "=b"}),  # only one separator
    ("a =:b", {"a": ":b"}),
    ("a b = c", {"a": "b = c"}),
    ("a", {"a": ""}),
    ("=v", {"": "v"}),
    ("key\\ with\\ spaces=v", {"key with spaces": "v"}),
    ("k\\=x=v", {"k=x": "v"}),
    ("k\\:x:v", {"k:x": "v"}),
    ("k=\\u0041\\t\\n\\r\\f\\\\\\q", {"k": "A\t\n\r\f\\q"}),
    ("k=caf\\u00e9", {"k": "café"}),
    ("# a comment\n! another\n   # indented comment\na=1", {"a": "1"}),
    ("#comment ending in a backslash \\\na=1", {"a": "1"}),  # comments never continue
    ("a=one\\\n    two\\\n\t three", {"a": "onetwothree"}),
    ("a=x\\\\\nb=y", {"a": "x\\", "b": "y"}),  # an even number of backslashes does not continue
    ("a=x\\\n\nb=y", {"a": "x", "b": "y"}),  # a blank continuation line ends the value
    ("a=x\\\n#y", {"a": "x#y"}),  # "#" on a continuation line is data
    ("a=x\\", {"a": "x"}),  # dangling continuation at end of input
    ("a=1\r\nb=2\r\n", {"a": "1", "b": "2"}),
    ("a=1\rb=2", {"a": "1", "b": "2"}),
    ("a=1\na=2", {"a": "2"}),
    ("", {}),
    ("\n\n   \n", {}),
])
def test_properties_load(text: str, expected: dict[str, str]) -> None:
    assert mp.load_properties(text) == expected


@pytest.mark.parametrize("text", ["a=\\u00G1", "a=\\u12"])
def test_properties_load_rejects_malformed_unicode_escape(text: str) -> None:
    with pytest.raises(MetaPropertiesError, match=r"Malformed \\uxxxx encoding\."):
        mp.load_properties(text)


def test_repeated_key_keeps_the_position_of_its_last_occurrence() -> None:
    assert list(mp.load_properties("a=1\nb=2\na=3")) == ["b", "a"]


# ------------------------------------------------------------------------------------------------------------
# MetaProperties.Builder rules


def test_v1_file_parses() -> None:
    text = f"#\n#Fri Feb 07 06:03:45 UTC 2025\nnode.id=4\ndirectory.id={DIR_A}\nversion=1\ncluster.id=c-1\n"
    assert mp.parse(text) == MetaProperties(V1, "c-1", 4, Uuid.from_string(DIR_A))


@pytest.mark.parametrize(("text", "message"), [
    ("version=2\nnode.id=1\ncluster.id=c", "Unknown meta.properties version number 2"),
    ("version=-1\nnode.id=1\ncluster.id=c", "Unknown meta.properties version number -1"),
    ("version=x\nnode.id=1\ncluster.id=c", "Invalid meta.properties version string 'x'"),
    ("version=\nnode.id=1\ncluster.id=c", "Invalid meta.properties version string ''"),
    ("version=1\ncluster.id=c", "Failed to find node.id"),
    ("version=1\nnode.id=one\ncluster.id=c", "Unable to read node.id as a base-10 number."),
    ("version=1\nnode.id=1 \ncluster.id=c", "Unable to read node.id as a base-10 number."),  # not trimmed
    ("version=1\nnode.id=1_0\ncluster.id=c", "Unable to read node.id as a base-10 number."),
    ("version=1\nnode.id=2147483648\ncluster.id=c", "Unable to read node.id as a base-10 number."),
    ("version=1\nnode.id=1", "cluster.id was not found."),
    ("version=1\nnode.id=1\ncluster.id=c\ndirectory.id=abc", "Unable to read directory.id as a Uuid: "),
    ("version=1\nnode.id=1\ncluster.id=c\ndirectory.id=", "Unable to read directory.id as a Uuid: "),
    (f"version=1\nnode.id=1\ncluster.id=c\ndirectory.id={DIR_A}==x",
     "Unable to read directory.id as a Uuid: "),
    ("broker.id=x", "Unable to read broker.id as a base-10 number."),
    # Kafka's order of checks: node.id before directory.id before cluster.id.
    ("version=1\ndirectory.id=bad", "Failed to find node.id"),
    ("version=1\nnode.id=1\ndirectory.id=bad", "Unable to read directory.id as a Uuid: "),
])
def test_parse_errors_carry_kafkas_message(text: str, message: str) -> None:
    with pytest.raises(MetaPropertiesError) as info:
        mp.parse(text)
    assert info.value.message.startswith(message)
    assert isinstance(info.value, InputError)


def test_parse_error_names_the_path() -> None:
    with pytest.raises(MetaPropertiesError) as info:
        mp.parse("version=7", path="/data/kafka/meta.properties")
    assert info.value.path == "/data/kafka/meta.properties"
    assert str(info.value) == "/data/kafka/meta.properties: Unknown meta.properties version number 7"


@pytest.mark.parametrize(("text", "expected"), [
    ("version= 1 \t\nnode.id=3\ncluster.id=c", MetaProperties(V1, "c", 3)),  # version is trimmed
    ("version=1\nnode.id=+7\ncluster.id=c", MetaProperties(V1, "c", 7)),  # Integer.parseInt takes a '+'
    ("version=1\nnode.id=-1\ncluster.id=c", MetaProperties(V1, "c", -1)),
    ("version=1\nnode.id=1\ncluster.id=", MetaProperties(V1, "", 1)),  # present, even if empty
    ("version=1\nnode.id=1\ncluster.id=Some(4L6g3nShT-eMCtK--X86sw)",
     MetaProperties(V1, "Some(4L6g3nShT-eMCtK--X86sw)", 1)),
    # v0 (ZooKeeper era): everything optional, broker.id instead of node.id, node.id ignored.
    ("", MetaProperties(V0)),
    ("broker.id=5\ncluster.id=zk", MetaProperties(V0, "zk", 5)),
    ("version=0\nnode.id=zzz", MetaProperties(V0)),
    (f"broker.id=5\ndirectory.id={DIR_B}", MetaProperties(V0, None, 5, Uuid.from_string(DIR_B))),
    # Reserved ids parse; MetaPropertiesEnsemble.verify is what rejects them.
    ("version=1\nnode.id=1\ncluster.id=c\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAQ",
     MetaProperties(V1, "c", 1, Uuid(0, 1))),
])
def test_parse_accepts(text: str, expected: MetaProperties) -> None:
    assert mp.parse(text) == expected


def test_constructor_applies_builder_build() -> None:
    with pytest.raises(MetaPropertiesError, match=r"cluster\.id was not found\."):
        MetaProperties(V1, None, 1)
    with pytest.raises(MetaPropertiesError, match=r"node\.id was not found\."):
        MetaProperties(V1, "c", None)
    assert MetaProperties(1, "c", 1).version is V1  # type: ignore[arg-type]


def test_to_properties_uses_broker_id_in_v0() -> None:
    assert MetaProperties(V0, "zk", 5).to_properties() == {"version": "0", "cluster.id": "zk",
                                                           "broker.id": "5"}
    assert MetaProperties(V0).to_properties() == {"version": "0"}
    assert MetaProperties(V1, "c", 1, Uuid.from_string(DIR_A)).to_properties() == {
        "version": "1", "cluster.id": "c", "node.id": "1", "directory.id": DIR_A}


# ------------------------------------------------------------------------------------------------------------
# Writer


def test_to_text_layout() -> None:
    meta = MetaProperties(V1, "ksddns,sdsjswnd,dnjsd", 1, Uuid.from_string(DIR_A))
    assert mp.to_text(meta, date=datetime(2025, 2, 7, 6, 3, 45, tzinfo=UTC)) == (
        "#\n#Fri Feb 07 06:03:45 UTC 2025\ncluster.id=ksddns,sdsjswnd,dnjsd\n"
        f"directory.id={DIR_A}\nnode.id=1\nversion=1\n")


def test_java_date_string() -> None:
    assert mp.java_date_string(datetime(2025, 1, 22, 6, 14, 12)) == "Wed Jan 22 06:14:12 UTC 2025"
    cet = timezone(timedelta(hours=1), "CET")
    assert mp.java_date_string(datetime(2024, 12, 1, 23, 5, 9, tzinfo=cet)) == "Sun Dec 01 23:05:09 CET 2024"
    assert mp.to_text(MetaProperties(V0)).splitlines()[1].endswith(str(datetime.now(UTC).year))


def test_values_are_escaped_the_java_way() -> None:
    meta = MetaProperties(V1, " a=b:c#d!e\\f\tg\nh\ri\fj k", 1)
    text = mp.to_text(meta, date=datetime(2025, 1, 1, tzinfo=UTC))
    # Only the leading space of a value is escaped.
    assert "cluster.id=\\ a\\=b\\:c\\#d\\!e\\\\f\\tg\\nh\\ri\\fj k\n" in text
    assert mp.parse(text) == meta


def test_keys_escape_every_space_and_comments_are_written() -> None:
    text = mp.store_properties({"a b": "c d", "x": ""}, comments="line one\nline two",
                               date=datetime(2025, 1, 1, tzinfo=UTC))
    assert text.splitlines() == ["#line one", "#line two", "#Wed Jan 01 00:00:00 UTC 2025", "a\\ b=c d", "x="]
    assert mp.load_properties(text) == {"a b": "c d", "x": ""}


def test_non_ascii_is_written_raw_in_utf8_and_read_back(tmp_path: Path) -> None:
    meta = MetaProperties(V1, "clüster-ñ", 2)
    path = tmp_path / "meta.properties"
    path.write_text(mp.to_text(meta), encoding="utf-8")
    assert "clüster-ñ" in path.read_text(encoding="utf-8")
    assert mp.read_file(path) == meta


def test_latin1_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "meta.properties"
    path.write_bytes(b"version=1\nnode.id=1\ncluster.id=caf\xe9\n")  # not valid UTF-8
    assert mp.read_file(path).cluster_id == "café"


_uuids = st.builds(Uuid.from_int, st.integers(min_value=0, max_value=(1 << 128) - 1))
_int32 = st.integers(min_value=-(1 << 31), max_value=(1 << 31) - 1)
_meta = st.one_of(
    st.builds(MetaProperties, st.just(V1), st.text(), _int32, st.none() | _uuids),
    st.builds(MetaProperties, st.just(V0), st.none() | st.text(), st.none() | _int32, st.none() | _uuids),
)


@given(_meta)
def test_round_trip_parse_of_to_text(meta: MetaProperties) -> None:
    assert mp.parse(mp.to_text(meta)) == meta


# ------------------------------------------------------------------------------------------------------------
# Ensemble: MetaPropertiesEnsemble.verify + KafkaRaftServer.initializeLogDirs


def v1(node: int = 1, cluster: str = CLUSTER, directory: str | None = DIR_A) -> str:
    return f"version=1\nnode.id={node}\ncluster.id={cluster}\n" + (
        f"directory.id={directory}\n" if directory else "")


def log_dir(root: Path, name: str, text: str | None) -> Path:
    path = root / name
    path.mkdir(parents=True)
    if text is not None:
        (path / "meta.properties").write_text(text)
    return path


def messages(findings: list[Finding]) -> list[tuple[str, str | None, str]]:
    return [(str(f.severity), f.path, f.message) for f in findings]


def test_consistent_node_has_no_findings(tmp_path: Path) -> None:
    a = log_dir(tmp_path, "a", v1(directory=DIR_A))
    b = log_dir(tmp_path, "b", v1(directory=DIR_B))
    assert mp.verify_log_dirs([a, b], expected_node_id=1, expected_cluster_id=CLUSTER) == []
    ensemble = MetaPropertiesEnsemble.load([b, a])
    assert [d.path for d in ensemble.log_dirs] == [str(a), str(b)]
    assert (ensemble.node_id(), ensemble.cluster_id()) == (1, CLUSTER)


def test_cluster_id_mismatch(tmp_path: Path) -> None:
    a = log_dir(tmp_path, "a", v1(cluster="one", directory=DIR_A))
    b = log_dir(tmp_path, "b", v1(cluster="two", directory=DIR_B))
    assert messages(mp.verify_log_dirs([a, b])) == [
        ("error", str(b), f"Invalid cluster.id in: {b}/meta.properties. Expected one, but read two")]
    assert messages(mp.verify_log_dirs([a], expected_cluster_id="zero")) == [
        ("error", str(a), f"Invalid cluster.id in: {a}/meta.properties. Expected zero, but read one")]


def test_node_id_mismatch_and_expected_node_id(tmp_path: Path) -> None:
    a = log_dir(tmp_path, "a", v1(node=1, directory=DIR_A))
    b = log_dir(tmp_path, "b", v1(node=2, directory=DIR_B))
    assert messages(mp.verify_log_dirs([a, b])) == [(
        "error", str(b), f"Stored node id 2 doesn't match previous node id 1 in {b}/meta.properties. If you "
        "moved your data, make sure your configured node id matches. If you intend to create a new node, you "
        "should remove all data in your data directories.")]
    found = mp.verify_log_dirs([a, b], expected_node_id=5)
    assert [f.path for f in found] == [str(a), str(b)]
    assert all("doesn't match previous node id 5" in f.message for f in found)


def test_reserved_and_duplicate_directory_ids(tmp_path: Path) -> None:
    a = log_dir(tmp_path, "a", v1(directory=DIR_A))
    b = log_dir(tmp_path, "b", v1(directory=DIR_A))
    c = log_dir(tmp_path, "c", v1(directory="AAAAAAAAAAAAAAAAAAAAAg"))  # LOST
    assert messages(mp.verify_log_dirs([a, b, c])) == [
        ("error", str(b), f"Duplicate directory ID Optional[{DIR_A}] found. It was the ID of {a}, "
                          f"but also of {b}"),
        ("error", str(c), f"Invalid resrved directory ID AAAAAAAAAAAAAAAAAAAAAg found in {c}"),
    ]


def test_missing_directory_id_is_a_warning(tmp_path: Path) -> None:
    a = log_dir(tmp_path, "a", v1(directory=None))
    (finding,) = mp.verify_log_dirs([a])
    assert finding.severity == "warning"
    assert finding.path == str(a)
    assert "Kafka generates a random one" in finding.message


def test_empty_and_unreadable_dirs(tmp_path: Path) -> None:
    empty = log_dir(tmp_path, "empty", None)
    broken = log_dir(tmp_path, "broken", "version=9\n")
    assert messages(mp.verify_log_dirs([empty, broken])) == [
        ("error", str(broken), f"Error while reading meta.properties file {broken}/meta.properties: "
                               "Unknown meta.properties version number 9"),
        ("error", None, "No readable meta.properties files found."),
        ("error", str(empty), f"No `meta.properties` found in {empty} (have you run `kafka-storage.sh` to "
                              "format the directory?)"),
    ]
    ensemble = MetaPropertiesEnsemble.load([empty, broken])
    assert [d.state for d in ensemble.log_dirs] == [LogDirState.ERROR, LogDirState.EMPTY]
    assert ensemble.log_dirs[0].error == "Unknown meta.properties version number 9"


def test_metadata_log_dir_rules(tmp_path: Path) -> None:
    meta_dir = log_dir(tmp_path, "meta", "version=1\nnode.id=x\n")
    data = log_dir(tmp_path, "data", v1(directory=DIR_B))
    (data / "__cluster_metadata-0").mkdir()
    assert messages(mp.verify_log_dirs([data], metadata_log_dir=meta_dir)) == [
        ("error", str(meta_dir), f"Error while reading meta.properties file {meta_dir}/meta.properties: "
                                 "Unable to read node.id as a base-10 number."),
        ("error", str(meta_dir), f"Encountered I/O error in metadata log directory {meta_dir}. "
                                 "Cannot continue."),
        ("error", str(data), f"Found unexpected metadata location in data directory "
                             f"`{data}/__cluster_metadata-0` (the configured metadata directory is "
                             f"{meta_dir})."),
    ]
    ensemble = MetaPropertiesEnsemble.load([data])
    assert messages(ensemble.verify(flags=KRAFT_STARTUP_FLAGS)) == [
        ("error", None, "No metadata log directory was specified.")]


def test_v0_rules(tmp_path: Path) -> None:
    zk = log_dir(tmp_path, "zk", "broker.id=3\ncluster.id=c\n")
    bare = log_dir(tmp_path, "bare", "version=0\n")
    kraft = log_dir(tmp_path, "kraft", v1(node=3, cluster="c", directory=DIR_B))
    ensemble = MetaPropertiesEnsemble.load([zk, bare, kraft])
    assert messages(ensemble.verify(flags={VerificationFlag.REQUIRE_V0})) == [
        ("error", str(kraft), f"Found unexpected version in {kraft}/meta.properties. ZK-based brokers that "
                              "are not migrating only support version 0 (which is implicit when the "
                              "`version` field is missing).")]
    assert messages(ensemble.startup_findings()) == [
        ("error", str(bare), f"Error: node ID not found in {bare}"),
        ("error", str(bare), f"Error: cluster ID not found in {bare}"),
        ("warning", str(bare), f"No directory.id in {bare}/meta.properties: {GENERATED}"),
        ("warning", str(zk), f"No directory.id in {zk}/meta.properties: {GENERATED}"),
    ]


GENERATED = ("Kafka generates a random one and rewrites the file at startup (KIP-858), so the id the "
             "metadata log will use is not known yet")


def test_loader_needs_a_directory() -> None:
    with pytest.raises(InputError, match="You must specify at least one log directory"):
        MetaPropertiesEnsemble.load([])


def test_severity_compares_as_text() -> None:
    assert Finding(Severity.ERROR, None, "x") == Finding("error", None, "x")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------------------
# Inventory


def test_inventory_of_several_nodes(tmp_path: Path) -> None:
    n1a = log_dir(tmp_path, "node1/d1", v1(node=1, directory=DIR_A))
    n1b = log_dir(tmp_path, "node1/d2", v1(node=1, directory="p2UpbSD99eygD2ZToiSMzg"))
    n2 = log_dir(tmp_path, "node2/d1", v1(node=2, directory=DIR_B))
    (n2 / "__cluster_metadata-0").mkdir()
    (n2 / "__cluster_metadata-0" / "meta.properties").write_text("ignored: not a log dir")
    inv = mp.inventory([tmp_path])
    assert inv.rows == (
        DirInventoryRow(1, str(n1a), Uuid.from_string(DIR_A), CLUSTER, 1),
        DirInventoryRow(1, str(n1b), Uuid.from_string("p2UpbSD99eygD2ZToiSMzg"), CLUSTER, 1),
        DirInventoryRow(2, str(n2), Uuid.from_string(DIR_B), CLUSTER, 1),
    )
    assert inv.findings == {}
    assert inv.ok


def test_same_directory_id_on_two_nodes_is_an_error(tmp_path: Path) -> None:
    a = log_dir(tmp_path, "node1/d", v1(node=1, directory=DIR_A))
    b = log_dir(tmp_path, "node2/d", v1(node=2, directory=DIR_A))
    inv = mp.inventory([a, b])
    message = f"Directory ID {DIR_A} is used by more than one node: node 1 ({a}), node 2 ({b})"
    assert inv.findings == {1: (Finding(Severity.ERROR, str(a), message),),
                            2: (Finding(Severity.ERROR, str(b), message),)}
    assert not inv.ok


def test_inventory_groups_problems_by_node(tmp_path: Path) -> None:
    good = log_dir(tmp_path, "n3/good", v1(node=3, directory=DIR_A))
    bad_dir_id = log_dir(tmp_path, "n3/bad", v1(node=3, directory="not-a-uuid"))
    unreadable = log_dir(tmp_path, "n9/bad", "version=1\nnode.id=nine\n")
    unformatted = log_dir(tmp_path, "n9/empty", None)
    missing = tmp_path / "does-not-exist"
    inv = mp.inventory([good, bad_dir_id, unreadable, unformatted, missing])
    assert [r.path for r in inv.rows] == [str(good)]
    assert list(inv.findings) == [3, None]
    (node3,) = inv.findings[3]
    assert node3.path == str(bad_dir_id)
    assert "Unable to read directory.id as a Uuid" in node3.message
    assert messages(list(inv.findings[None])) == [
        ("error", str(missing), f"{missing} does not exist"),
        ("error", str(unreadable), f"Error while reading meta.properties file {unreadable}/meta.properties: "
                                   "Unable to read node.id as a base-10 number."),
        ("error", str(unformatted), f"No `meta.properties` found in {unformatted} (have you run "
                                    "`kafka-storage.sh` to format the directory?)"),
    ]
    assert len(inv.all_findings) == 4


def test_inventory_of_a_folder_without_any_meta_properties(tmp_path: Path) -> None:
    inv = mp.inventory([tmp_path])
    assert inv.rows == ()
    assert [f.message for f in inv.all_findings] == [
        f"No `meta.properties` found in {tmp_path} (have you run `kafka-storage.sh` to format the "
        "directory?)"]
