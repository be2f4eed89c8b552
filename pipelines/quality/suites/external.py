"""The ``external`` suite: I22 and I24 from a meta.properties inventory (``--dirs``, else the ``dir_inventory``
table) or broker configs (``--broker-config``); skipped, with the reason, without them; I23 (needs DescribeLogDirs)
and I25 (needs cordon data, Kafka ≥ 4.3) are always skipped for now."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from jbod_model import invariants as inv
from jbod_model.errors import InputError
from jbod_model.meta_properties import inventory, load_properties
from jbod_model.storage.files import METADATA_PARTITION_DIR
from jbod_model.uuid import Uuid
from pipelines.lakehouse.tables import dir_inventory_rows
from pipelines.quality.expectations import Check, Skip, column_of, expect_true
from pipelines.quality.frames import (
    MODEL_TABLES,
    Build,
    Frame,
    FrameBuilder,
    make_frame,
    optional_int,
)

CHECKS: tuple[Check, ...] = (
    expect_true("I22.jbod_needs_3_7_iv2", "external", "configured_dirs", "I22",
                "inventory/config: a broker with several data dirs runs at metadata.version ≥ 3.7-IV2 "
                "(jbod_supported)"),
    expect_true("I24.disk_directory_ids_unreserved", "external", "disk_inventory", "I24",
                "meta.properties: directory.id is not reserved (disk_directory_id_ok)"),
    Check("I24.disk_directory_ids_unique", "external", "disk_inventory", "directory_id", "unique", "I24",
          "meta.properties: a directory.id appears on one disk only"),
    expect_true("I24.online_directories_on_disk", "external", "registered_on_disk", "I24",
                "brokers + meta.properties: every online directory of an inventoried broker is one of its disks "
                "(online_directory_on_disk)"),
)

SKIPS: tuple[Skip, ...] = (
    Skip("I23.placement_matches_disks", "external", "I23",
         "needs DescribeLogDirs output (where each replica's log actually is); jbod check has no such input yet"),
    Skip("I25.cordoned_directories_get_no_replicas", "external", "I25",
         "no cordon data: cordoned directories (KIP-1066, Kafka ≥ 4.3) are not in the tables yet"),
)

def _is_metadata_only(path: Path) -> bool:
    """A log dir holding ``__cluster_metadata-0`` and no partition directory is the separate ``metadata.log.dir``,
    not a data dir (I22 counts data dirs; KRaft does not register the metadata dir unless it is also a log dir)."""
    if not (path / METADATA_PARTITION_DIR).is_dir():
        return False
    return not any(p.is_dir() and p.name != METADATA_PARTITION_DIR for p in path.iterdir())


#: Why the inventory checks are skipped when there is no inventory at all.
NO_INVENTORY = ("needs a meta.properties inventory: --dirs, or one loaded into dir_inventory (jbod dirs DIR --tables, "
                "jbod run --dirs)")


def _inventory_rows(b: Build) -> tuple[list[dict[str, Any]], str | None] | None:
    """The inventory's rows for this cluster and, when there are none, why: from ``--dirs`` when given, else from
    the ``dir_inventory`` table that ``jbod run --dirs`` or ``jbod dirs --tables`` loaded; None when there is neither.

    From ``--dirs``: the rows whose cluster.id is the cluster's; when none is (tables keyed by another name), all of
    them — which is right when one cluster's disks were given."""
    if not b.inputs.dirs:
        loaded = (None if b.tables.tables_dir is None
                  else dir_inventory_rows(b.tables.tables_dir, b.tables.cluster_id))
        if not loaded:
            return None
        return [{"node_id": r.node_id, "path": r.path, "directory_id": None if r.directory_id is None
                 else str(r.directory_id), "parsed": r.directory_id, "cluster": r.cluster_id} for r in loaded], None
    inv_ = inventory(b.inputs.dirs)
    rows = [{"node_id": r.node_id, "path": r.path, "directory_id": None if r.directory_id is None
             else str(r.directory_id), "parsed": r.directory_id, "cluster": r.cluster_id} for r in inv_.rows]
    mine = [r for r in rows if r["cluster"] == b.tables.cluster_id]
    if mine:
        return mine, None
    if not rows:
        return [], f"no meta.properties found under {', '.join(str(d) for d in b.inputs.dirs)}"
    return rows, None


def _f_disk_inventory(b: Build) -> Frame:
    cols = {"node_id": "Int64", "path": "string", "directory_id": "string",
            column_of("I24.disk_directory_ids_unreserved"): "boolean"}
    got = _inventory_rows(b)
    if got is None:
        return Frame("disk_inventory", make_frame([], cols), ("row", "node_id", "path"), skip=NO_INVENTORY)
    rows, problem = got
    out = [{**r, column_of("I24.disk_directory_ids_unreserved"): (None if r["parsed"] is None
                                                                   else inv.disk_directory_id_ok(r["parsed"]))}
           for r in rows]
    return Frame("disk_inventory", make_frame(out, cols), ("row", "node_id", "path"), skip=problem)


def _f_registered_on_disk(b: Build) -> Frame:
    cols = {"broker_id": "Int64", "directory": "string", "offset": "Int64",
            column_of("I24.online_directories_on_disk"): "boolean", "disks": "object"}
    got = _inventory_rows(b)
    if got is None:
        return Frame("registered_on_disk", make_frame([], cols), ("row", "offset", "broker_id"), skip=NO_INVENTORY)
    rows, problem = got
    disks: dict[int, set[Uuid]] = {}
    for r in rows:
        if r["node_id"] is not None and r["parsed"] is not None:
            disks.setdefault(int(r["node_id"]), set()).add(r["parsed"])
    out = []
    for reg in b.model.cluster.brokers.values():
        if reg.id not in disks:
            continue  # a broker whose disks were not given: nothing to compare
        since = b.tables.table("brokers").set_index("broker_id")["since_offset"].get(reg.id)
        for d in reg.directories:
            out.append({"broker_id": reg.id, "directory": str(d), "offset": optional_int(since),
                        "I24_online_directories_on_disk": inv.online_directory_on_disk(d, disks[reg.id]),
                        "disks": sorted(str(x) for x in disks[reg.id])})
    return Frame("registered_on_disk", make_frame(out, cols), ("row", "offset", "broker_id", "directory"), ("disks",),
                 skip=problem)


def _config_dir_counts(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """Per broker config (``server.properties``): the node id and the number of configured data dirs."""
    out = []
    for path in paths:
        try:
            props = load_properties(path.read_text(encoding="latin-1"))
        except OSError as e:
            raise InputError(f"cannot read broker config {path}: {e.strerror or e}") from None
        node = props.get("node.id") or props.get("broker.id")
        roles = props.get("process.roles", "broker")
        if "broker" not in roles:
            continue  # a controller-only node has no data dirs
        dirs = props.get("log.dirs") or props.get("log.dir") or "/tmp/kraft-combined-logs"
        count = len([d for d in dirs.split(",") if d.strip()])
        out.append({"node_id": int(node) if node and node.strip().lstrip("-").isdigit() else None,
                    "source": str(path), "data_dirs": count})
    return out


def _f_configured_dirs(b: Build) -> Frame:
    cols = {"node_id": "Int64", "source": "string", "data_dirs": "Int64", "metadata_version": "string",
            "I22_jbod_needs_3_7_iv2": "boolean"}
    got = _inventory_rows(b)
    if got is None and not b.inputs.broker_configs:
        return Frame("configured_dirs", make_frame([], cols), ("row", "node_id", "source"),
                     skip=NO_INVENTORY + ", or broker configs (--broker-config)")
    counts = _config_dir_counts(b.inputs.broker_configs)
    if got is not None:
        rows, _problem = got
        per_node: dict[int | None, int] = {}
        for r in rows:
            if not _is_metadata_only(Path(r["path"])):
                per_node[r["node_id"]] = per_node.get(r["node_id"], 0) + 1
        counts += [{"node_id": n, "source": "meta.properties inventory", "data_dirs": c} for n, c in per_node.items()]
    mv = b.model.mv
    out = [{**c, "metadata_version": str(mv),
            column_of("I22.jbod_needs_3_7_iv2"): inv.jbod_supported(int(c["data_dirs"]), mv)} for c in counts]
    return Frame("configured_dirs", make_frame(out, cols), ("row", "node_id", "source", "metadata_version"))


#: The frames this suite builds, by name.
FRAMES: Mapping[str, FrameBuilder] = {
    "disk_inventory": _f_disk_inventory,
    "registered_on_disk": _f_registered_on_disk,
    "configured_dirs": _f_configured_dirs,
}
#: The tables each frame reads through ``Build``.
READS: Mapping[str, frozenset[str]] = {
    "disk_inventory": frozenset(),
    "registered_on_disk": MODEL_TABLES | {"brokers"},
    "configured_dirs": MODEL_TABLES,
}
