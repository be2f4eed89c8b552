"""Directory paths as operators know them: a broker's disk read from a copy of its filesystem (``--as-root``), and
the directory id ↔ path join (``DirectoryPaths``) combined from two sources and searched by path."""

from __future__ import annotations

from pathlib import Path

import pytest

from jbod_model.errors import InputError
from jbod_model.meta_properties import (
    DirInventoryRow,
    MetaProperties,
    MetaPropertiesVersion,
    Severity,
    inventory,
    path_on_node,
    to_text,
)
from jbod_model.report import DirectoryPaths, DirLocation
from jbod_model.uuid import Uuid

A, B, C = (Uuid.from_string(s) for s in ("P2aL9r4sQ3ytTKVrGe7tdQ", "Y8UXxSTrSB2pCc9s439Vkw", "JbzRyYgxSHyV9F8hM29Rbg"))


def _disk(root: Path, rel: str, node: int, directory: Uuid | None, cluster: str = "c1") -> Path:
    d = root / rel
    d.mkdir(parents=True)
    meta = MetaProperties(MetaPropertiesVersion.V1, cluster_id=cluster, node_id=node, directory_id=directory)
    (d / "meta.properties").write_text(to_text(meta))
    return d


@pytest.mark.parametrize(("log_dir", "root", "want"), [
    ("/collected/b3/mnt/d2", "/collected/b3", "/mnt/d2"),
    ("/collected/b3/mnt/d2", "/collected/b3/", "/mnt/d2"),
    ("collected/b3/var/lib/kafka/data", "collected/b3", "/var/lib/kafka/data"),
    ("./collected/b3/mnt/../mnt/d2", "collected/b3", "/mnt/d2"),
    ("/collected/b3", "/collected/b3", "/"),
])
def test_a_log_dir_under_a_root_copy_is_named_by_its_path_on_the_broker(log_dir: str, root: str, want: str) -> None:
    assert path_on_node(log_dir, root) == want


def test_a_log_dir_outside_the_root_is_refused() -> None:
    with pytest.raises(InputError, match="not under"):
        path_on_node("/collected/b4/mnt/d2", "/collected/b3")
    with pytest.raises(InputError, match="not under"):
        path_on_node("/collected/b33/mnt/d2", "/collected/b3")  # a prefix of the name is not a parent


def test_inventory_as_root_records_paths_on_the_brokers(tmp_path: Path) -> None:
    b1, b2 = tmp_path / "b1", tmp_path / "b2"
    _disk(b1, "mnt/d1", 1, A)
    _disk(b2, "mnt/d1", 2, B)
    # No directory.id yet (a warning naming the disk): the finding is about /mnt/d2 of node 2 too.
    _disk(b2, "mnt/d2", 2, None)
    inv = inventory([b1, b2], as_root=True)
    assert [(r.node_id, r.path, r.directory_id, r.read_from) for r in inv.rows] == [
        (1, "/mnt/d1", A, str(b1 / "mnt" / "d1")), (2, "/mnt/d1", B, str(b2 / "mnt" / "d1")),
        (2, "/mnt/d2", None, str(b2 / "mnt" / "d2"))]
    assert [(f.severity, f.path) for f in inv.all_findings] == [(Severity.WARNING, "/mnt/d2")]
    # Without --as-root the same folders give the paths read.
    assert [r.path for r in inventory([b1, b2]).rows] == [str(b1 / "mnt" / "d1"), str(b2 / "mnt" / "d1"),
                                                          str(b2 / "mnt" / "d2")]
    assert all(r.read_from is None for r in inventory([b1, b2]).rows)


def test_as_root_takes_folders_only(tmp_path: Path) -> None:
    disk = _disk(tmp_path / "b1", "mnt/d1", 1, A)
    inv = inventory([disk / "meta.properties", tmp_path / "missing"], as_root=True)
    assert inv.rows == ()
    messages = [f.message for f in inv.all_findings]
    assert any("is not a directory" in m for m in messages) and any("does not exist" in m for m in messages)


def test_a_directory_id_on_two_brokers_is_still_caught_with_as_root(tmp_path: Path) -> None:
    _disk(tmp_path / "b1", "mnt/d1", 1, A)
    _disk(tmp_path / "b2", "mnt/d1", 2, A)  # a disk image copied onto another broker
    inv = inventory([tmp_path / "b1", tmp_path / "b2"], as_root=True)
    errors = [(f.path, f.message) for f in inv.all_findings if f.severity is Severity.ERROR]
    assert [p for p, _ in errors] == ["/mnt/d1", "/mnt/d1"]
    assert all("used by more than one node" in m for _, m in errors)


def _paths(*rows: tuple[int, str, Uuid]) -> DirectoryPaths:
    return DirectoryPaths.from_inventory(DirInventoryRow(node_id=n, path=p, directory_id=d, cluster_id="c", version=1)
                                         for n, p, d in rows)


def test_overlay_prefers_the_given_locations_and_keeps_the_others() -> None:
    stored = _paths((1, "/mnt/d1", A), (2, "/mnt/d1", B))
    given = _paths((2, "/data/new", B), (3, "/mnt/d2", C))
    merged = stored.overlay(given)
    assert merged.get(A) == DirLocation(1, "/mnt/d1")
    assert merged.get(B) == DirLocation(2, "/data/new") and merged.get(C) == DirLocation(3, "/mnt/d2")
    assert len(merged) == 3 and len(stored) == 2  # a new value; the stored paths are unchanged


def test_conflicts_of_an_id_the_overlay_places_are_dropped() -> None:
    stored = _paths((1, "/mnt/d1", A), (2, "/mnt/d9", A))
    assert [d for d, _ in stored.conflicts] == [A]
    assert stored.overlay(_paths((1, "/mnt/d1", A))).conflicts == ()
    assert [d for d, _ in stored.overlay(_paths((3, "/x", C))).conflicts] == [A]


def test_directories_at_a_path_by_node() -> None:
    paths = _paths((1, "/mnt/d1", A), (2, "/mnt/d1", B), (2, "/mnt/d2", C))
    assert paths.directories_at("/mnt/d1") == (A, B)
    assert paths.directories_at("/mnt/d1", 2) == (B,)
    assert paths.directories_at("/mnt/d2") == (C,)
    assert paths.directories_at("/mnt/d3") == () and paths.directories_at("/mnt/d2", 1) == ()
