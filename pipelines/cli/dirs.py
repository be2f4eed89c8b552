"""``jbod dirs``: the directory inventory from meta.properties files, validated as Kafka validates a node's log dirs
at startup, and optionally loaded into the ``dir_inventory`` Delta table.

:func:`register` adds the command to the ``jbod`` app (``pipelines.cli.main``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from jbod_model.errors import InputError
from jbod_model.meta_properties import inventory
from jbod_model.records.json_codec import dumps
from pipelines.cli import shared
from pipelines.cli.shared import JsonOpt


def dirs(paths: Annotated[list[Path], typer.Argument(
             help="meta.properties files, log dirs holding one, or folders to search.", show_default=False)],
         as_root: Annotated[bool, typer.Option(
             "--as-root", help="Each PATH is a copy of one broker's filesystem root (e.g. collected with rsync): "
                               "record each disk by its path on the broker (/collected/b3/mnt/d2 under "
                               "/collected/b3 is /mnt/d2).")] = False,
         tables: Annotated[Path | None, typer.Option(
             "--tables", help="Also load the inventory into the dir_inventory Delta table under DIR (the current "
                              "disks of the nodes it covers; ids gone from them are kept as retired), where report, "
                              "whatif and run read paths.",
             show_default=False)] = None,
         cluster_id: Annotated[str | None, typer.Option(
             "--cluster-id", help="With --tables: the cluster of directories whose meta.properties has no "
                                  "cluster.id (version 0).", show_default=False)] = None,
         as_json: JsonOpt = False) -> None:
    """The directory inventory from meta.properties (node, path, directory id, cluster) and its validation, as
    Kafka validates a node's log dirs at startup. Exits 1 when a finding is an error."""
    with shared.fail():
        if cluster_id is not None and tables is None:
            raise InputError("--cluster-id goes with --tables (it names the cluster of the rows loaded)")
        inv = inventory(paths, as_root=as_root)
        findings = inv.all_findings
        if as_json:
            print(dumps({
                "directories": [{"nodeId": r.node_id, "path": r.path, "directoryId": str(r.directory_id)
                                 if r.directory_id else None, "clusterId": r.cluster_id, "version": int(r.version),
                                 "readFrom": r.read_from}
                                for r in inv.rows],
                "findings": [{"severity": str(f.severity), "path": f.path, "message": f.message}
                             for f in findings]}))
        else:
            table = shared.table("Log directories", "node", "path", "directory id", "cluster id", "version")
            for r in inv.rows:
                table.add_row(str(r.node_id), r.path, str(r.directory_id or "(none)"), r.cluster_id or "",
                              str(int(r.version)))
            shared.console().print(table)
            for f in findings:
                colour = "red" if str(f.severity) == "error" else "yellow"
                shared.console().print(f"[{colour}]{f.severity}[/] {f.path}: {f.message}", highlight=False)
        if tables is not None:
            shared.load_inventory(tables, inv, cluster_id)
        if any(str(f.severity) == "error" for f in findings):
            raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``dirs`` to ``app``."""
    app.command()(dirs)
