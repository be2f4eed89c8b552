"""``jbod whatif``: what if these disks failed now — the reference controller's directory-failure handling run on the
image of INPUT (or of the Spark job's tables), and the partitions that lose a replica, their leader or min ISR.

:func:`register` adds the command to the ``jbod`` app (``pipelines.cli.main``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from jbod_model.errors import InputError
from jbod_model.meta_properties import read_file as read_meta_properties
from jbod_model.records.json_codec import dumps, record_to_json
from jbod_model.report import DirectoryPaths, format_directory
from jbod_model.sources import open_inputs
from jbod_model.uuid import Uuid
from jbod_model.whatif import what_if_directories_fail
from pipelines.cli import shared
from pipelines.cli.shared import AsOfOpt, JsonOpt
from pipelines.report.load import directory_paths_for, load_paths, resolve_as_of
from pipelines.report.wording import counted


def directory_id(value: str, paths: DirectoryPaths | None = None, online: frozenset[Uuid] = frozenset()) -> Uuid:
    """A directory given as its Uuid, as a log dir path (or its meta.properties) here whose directory.id is read,
    or as a path the inventory knows (``/mnt/d2``, or ``3:/mnt/d2`` for broker 3's when several have one). A path
    the inventory also knows under a retired id (the disk replaced there before) means the ``online`` one."""
    path = Path(value)
    if path.exists():
        meta = read_meta_properties(path / "meta.properties" if path.is_dir() else path)
        if meta.directory_id is None:
            raise InputError(f"{path} has no directory.id in its meta.properties")
        return meta.directory_id
    if paths is not None:
        node, colon, rest = value.partition(":")
        node_id, on_node = (int(node), rest) if colon and node.isdigit() else (None, value)
        found = paths.directories_at(on_node, node_id, online)
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            where = ", ".join(f"{loc.node_id}:{on_node}" for d in found if (loc := paths.get(d)) is not None)
            raise InputError(f"{value} is a disk of several brokers: name one as NODE:PATH ({where})")
    try:
        return Uuid.from_string(value)
    except InputError:
        raise InputError(f"--fail-dir {value}: not a directory id, nor a log dir here"
                         + (", nor a path of the inventory" if paths is not None else
                            " (paths of brokers' disks need --dirs or a dir_inventory table)")) from None


def whatif(inputs: Annotated[list[Path] | None, typer.Argument(
               help="A node's metadata log dir (or several nodes' copies of one cluster), segment(s) <offset>.log, a "
                    "snapshot <offset>-<epoch>.checkpoint, kafka-dump-log text, or canonical JSONL. Not with "
                    "--tables.", show_default=False)] = None,
           fail_dir: Annotated[list[str] | None, typer.Option(
               "--fail-dir", help="A directory to fail: its Uuid, a log dir path / meta.properties here holding its "
                                  "directory.id, or a disk's path on its broker as the inventory (--dirs, "
                                  "dir_inventory) names it, NODE:PATH when several brokers have it. Repeat for "
                                  "several.", show_default=False)] = None,
           as_of_offset: shared.AsOfOffsetOpt = None,
           until_offset: shared.UntilOffsetOpt = None,
           tables: Annotated[Path | None, typer.Option(
               "--tables", help="Read the log from the Spark job's Delta tables instead of INPUT (disks are named "
                                "from its dir_inventory table).", show_default=False)] = None,
           cluster: Annotated[str | None, typer.Option(
               "--cluster", help="With --tables: the cluster (optional when the tables hold one).",
               show_default=False)] = None,
           as_of: AsOfOpt = None,
           dirs: Annotated[list[Path] | None, typer.Option(
               "--dirs", help="meta.properties files or folders holding them, to name disks by path (with "
                              "--tables they win over dir_inventory).", show_default=False)] = None,
           as_root: Annotated[bool, typer.Option(
               "--as-root", help="Each --dirs folder is a copy of one broker's filesystem root.")] = False,
           as_json: JsonOpt = False) -> None:
    """What if these disks failed now? Runs the reference controller's directory-failure handling on the image of
    INPUT (or of the Delta tables) and lists the partitions that lose a replica, lose their leader, go under min
    ISR or go offline."""
    with shared.fail():
        as_of_offset = shared.as_of_offset(as_of_offset, until_offset)
        shared.check_source(inputs, tables, tables_only={"--cluster": cluster, "--as-of": as_of}, input_only={})
        if not fail_dir:
            raise InputError("name the disks to fail with --fail-dir (repeat for several)")
        explicit, _inv = load_paths(dirs, as_root=as_root)
        if tables is not None:
            from pipelines.lakehouse.tables import (  # noqa: PLC0415 - pyarrow/deltalake when asked
                metadata_image,
                one_version,
                online_directories,
                resolve_cluster,
            )

            with one_version():  # every read at one version of each table
                cid = resolve_cluster(tables, cluster)
                at = resolve_as_of(tables, cid, as_of_offset, as_of)
                paths = directory_paths_for(tables, cid, explicit)
                online = online_directories(tables, cid, at)
                failing = [directory_id(v, paths, online) for v in fail_dir]
                # The image from the current/history tables, not a replay of the records table from its start; of
                # the partitions only those on the failing disks, all the prediction reads (jbod_model.whatif).
                image = metadata_image(tables, cid, at, on_directories=failing)
        else:
            loaded = open_inputs(inputs or [], until_offset=shared.until_offset(as_of_offset))
            runner = shared.stream_runner(loaded)
            for _event in runner.run(shared.tracked(loaded.entries, "decoding and replaying")):
                pass
            image, paths = runner.image, explicit
            online = frozenset(d for b in image.cluster.brokers.values() for d in b.directories)
            failing = [directory_id(v, paths, online) for v in fail_dir]
        result = what_if_directories_fail(image, failing)

        def disk(broker: int, directory: Uuid) -> str:
            # format_directory names a disk the inventory knows ("broker 2 /mnt/d1 (Y8UXxSTr…)"), else gives the id.
            known = paths is not None and paths.get(directory) is not None
            return format_directory(directory, paths, broker) if known else f"broker {broker} {directory}"

        def path_of(directory: Uuid) -> str | None:
            loc = paths.get(directory) if paths is not None else None
            return None if loc is None else loc.path

        if as_json:
            print(dumps({
                "failed": [{"brokerId": b, "directory": str(d), "path": path_of(d)} for b, d in result.failed],
                "records": [record_to_json(r) for r in result.records],
                "partitions": [{"topicId": str(i.topic_id), "topicName": i.topic_name, "partitionId": i.partition_id,
                                "brokerId": i.broker_id, "directory": str(i.directory),
                                "leaderBefore": i.leader_before, "leaderAfter": i.leader_after,
                                "isrBefore": list(i.isr_before), "isrAfter": list(i.isr_after),
                                "minIsr": i.min_isr, "losesLeader": i.loses_leader,
                                "offlineAfter": i.offline_after, "underMinIsrAfter": i.under_min_isr_after}
                               for i in result.impacts]}))
            return
        failed = ", ".join(disk(b, d) for b, d in result.failed)
        n = {"lose": len(result.lose_leader), "records": len(result.records), "replicas": len(result.impacts)}
        shared.console().print(
            f"If {failed} failed now: {counted(n['replicas'], 'replica loses its disk', 'replicas lose their disk')}, "
            f"{counted(n['lose'], 'partition loses its leader', 'partitions lose their leader')}, "
            f"{len(result.go_offline)} go offline, {len(result.go_under_min_isr)} go under min ISR (the controller "
            f"would write {counted(n['records'], 'metadata record')} for it; --json lists them).", highlight=False)
        table = shared.table("Affected partitions", "topic", "partition", "broker", "leader before → after",
                       "ISR before → after", "min ISR", "outcome")
        for i in result.impacts:
            outcome = ("OFFLINE" if i.offline_after else "leader moves" if i.loses_leader else
                       "under min ISR" if i.under_min_isr_after else "loses a follower")
            table.add_row(i.topic_name, str(i.partition_id), str(i.broker_id), f"{i.leader_before} → {i.leader_after}",
                          f"{list(i.isr_before)} → {list(i.isr_after)}", str(i.min_isr), outcome)
        shared.console().print(table)


def register(app: typer.Typer) -> None:
    """Add ``whatif`` to ``app``."""
    app.command()(whatif)
