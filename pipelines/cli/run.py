"""``jbod run``: replay KRaft metadata on Spark into the Delta tables (:mod:`pipelines.streaming.job`) and print where
replicas went offline; with no input, the bundled demo cluster with a disk failure.

:func:`register` adds the command to the ``jbod`` app (``pipelines.cli.main``). Spark, pandas and Delta load only when
the command runs (about a second): the other commands stay quick.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from jbod_model.errors import InputError
from jbod_model.meta_properties import inventory
from jbod_model.records.json_codec import dumps
from jbod_model.report import format_directory
from jbod_model.storage.log_reader import ReadPolicy
from jbod_model.uuid import Uuid
from pipelines.cli import shared
from pipelines.cli.shared import JsonOpt
from pipelines.config.profiles import resolve_config
from pipelines.streaming.session import start_jvm_for

#: The bundled demo: a request stream (broker registrations, topics, heartbeats) in which a disk fails.
DEMO_INPUT = Path(__file__).resolve().parents[1] / "examples" / "demo-disk-failure.jsonl"
#: The bundled demo's disks: a copy of each broker's filesystem root (``broker-<id>/mnt/d<n>/meta.properties``),
#: loaded into ``dir_inventory`` by a ``jbod run`` without ``--input`` so that its failed disk shows by path.
DEMO_LOG_DIRS = Path(__file__).resolve().parents[1] / "examples" / "demo-log-dirs"
#: The demo's cluster id (its registrations' clusterId, its meta.properties' cluster.id): the demo JSONL has no
#: meta.properties beside it, so the default run names its cluster this way to join it with its disks.
DEMO_CLUSTER_ID = "JbodDemoCluster0000001"


def _print_run_summary(summary: Any) -> None:
    """Print a :class:`pipelines.streaming.job.RunSummary`; disks by path where ``dir_inventory`` knows them."""
    from pipelines.lakehouse.tables import directory_paths  # noqa: PLC0415 - pyarrow/deltalake, loaded by `run` anyway
    from pipelines.report.wording import FIRST_NAMES, collapsed, split_long  # noqa: PLC0415 - beside the line above

    console = shared.console()
    console.print(f"Replayed {summary.rows} output rows in {len(summary.batches)} micro-batches "
                  f"({summary.seconds:.1f} s).", highlight=False)
    for c in summary.clusters:
        console.print(f"[bold]cluster {c.cluster_id}[/]: metadata.version {c.metadata_version}, last offset "
                      f"{c.last_offset}, {c.brokers} brokers, {c.topics} topics, {c.partitions} partitions, "
                      f"{c.replicas} replicas", highlight=False)
        if c.offline_by_broker_dir:
            paths = directory_paths(summary.tables_dir, c.cluster_id)
            table = shared.table("Offline replicas by broker and directory", "broker", "directory", "offline replicas")
            for broker in sorted(c.offline_by_broker_dir):
                for directory, count in sorted(c.offline_by_broker_dir[broker].items()):
                    table.add_row(str(broker), format_directory(Uuid.from_string(directory), paths, broker),
                                  str(count))
            console.print(table)
            console.print("Reasons: " + ", ".join(f"{r} {n}" for r, n in sorted(c.offline_reasons.items())),
                          highlight=False)
        else:
            console.print("No offline replicas.")
        if c.leaderless:
            names = [f"{t}-{p}" for t, p in c.leaderless]
            cut = split_long(names, FIRST_NAMES)[1]
            console.print("Leaderless partitions: " + collapsed(names) + (" (--json lists them all)" if cut else ""),
                          highlight=False)
        else:
            console.print("No leaderless partition.")
        for gap in c.gaps:
            console.print(f"[yellow]log gap:[/] {gap}", highlight=False)
        for fault in c.faults:
            console.print(f"[bold red]replay stopped:[/] {fault}", highlight=False)
    console.print(f"Tables: {summary.tables_dir} (checkpoint {summary.checkpoint_dir}). Read them through the Delta "
                  "log, e.g. pipelines.lakehouse.tables.as_of_image or deltalake.DeltaTable.", highlight=False)


def run(inputs: Annotated[list[Path] | None, typer.Option(
            "--input", "-i", help="Metadata log dirs (or a directory of them), a segment or snapshot file, canonical "
                                  "JSONL, kafka-dump-log text; "
                                  "repeat for several. Default: the bundled demo cluster with a disk failure.")] = None,
        tables: Annotated[Path | None, typer.Option("--tables", help="Where the Delta tables go (profile: "
                                                                     "./lakehouse).")] = None,
        conf: Annotated[str | None, typer.Option("--conf", help="A profile in conf/ (local, standalone, cluster) or a "
                                                                "YAML file.")] = None,
        follow: Annotated[bool, typer.Option("--follow", help="Keep running and pick up new files and grown "
                                                              "segments (default: process what is there, stop).")
                          ] = False,
        cluster_id: Annotated[str | None, typer.Option("--cluster-id", help="Cluster id for inputs without a "
                                                                            "meta.properties (and for --dirs "
                                                                            "files without cluster.id).")] = None,
        max_entries_per_batch: Annotated[int | None, typer.Option(
            "--max-entries-per-batch", min=1, help="Cap each micro-batch: at most this many entries, shared among the "
                                                   "clusters with new records (default 500000).")] = None,
        buckets: Annotated[int | None, typer.Option(
            "--buckets", min=1, help="Replay buckets per cluster: one cluster's replay spread over this many state "
                                     "keys, to use several cores (default 4; fixed into the checkpoint).",
            show_default=False)] = None,
        master: Annotated[str | None, typer.Option("--master", help="Spark master URL.")] = None,
        dirs: Annotated[list[Path] | None, typer.Option(
            "--dirs", help="meta.properties files or folders holding them: loaded into the dir_inventory table "
                           "after the run, so disks show by path (repeat for several). Default with no --input: "
                           "the demo's.", show_default=False)] = None,
        as_root: Annotated[bool, typer.Option(
            "--as-root", help="Each --dirs folder is a copy of one broker's filesystem root (see jbod dirs).")
                           ] = False,
        policy: Annotated[ReadPolicy | None, typer.Option(
            "--policy", help="On undecodable input: 'fail' (naming the file and offsets), or 'skip' it, keep every "
                             "good record and write a log_gaps row per skipped range (profile: read_policy, "
                             "fail).", show_default=False)] = None,
        as_json: JsonOpt = False) -> None:
    """Replay KRaft metadata on Spark into Delta tables (structured streaming, stateful, exactly once) and print
    where replicas went offline. With no input, the bundled demo cluster with a disk failure is replayed, and its
    disks' meta.properties are loaded into dir_inventory."""
    with shared.fail():
        config = resolve_config(conf, cli={"tables": tables, "cluster_id": cluster_id,
                                           "max_entries_per_batch": max_entries_per_batch, "buckets": buckets,
                                           "spark.master": master,
                                           "read_policy": None if policy is None else shared.policy(policy)})
        if inputs is None and config.cluster_id is None:
            # The demo: its cluster named as its disks name it.
            config = config.model_copy(update={"cluster_id": DEMO_CLUSTER_ID})
        # Spark's JVM starts while this command imports the job (Spark, pandas and Delta load only for it, about a
        # second: the other commands stay quick).
        start_jvm_for(config, inputs or [DEMO_INPUT])
        from pipelines.streaming.job import run_with_config, stdout_to_stderr  # noqa: PLC0415

        if inputs is None and dirs is None:
            # The demo's disks: each broker's copy read as that broker's root.
            dirs, as_root = sorted(p for p in DEMO_LOG_DIRS.iterdir() if p.is_dir()), True
        # Read before the run: a wrong path fails now, not after minutes of Spark.
        inv = inventory(dirs, as_root=as_root) if dirs else None
        if inv is not None and not inv.rows:
            raise InputError(f"no meta.properties found under {', '.join(str(d) for d in dirs or [])}")
        with stdout_to_stderr(), shared.batch_progress() as progress:
            summary = run_with_config(inputs or [DEMO_INPUT], config, follow=follow or None, on_batch=progress,
                                      on_session=progress.session_started)
        if inv is not None:
            shared.load_inventory(config.tables, inv, config.cluster_id)
            for finding in inv.all_findings:
                shared.console(stderr=True).print(f"[yellow]{finding.severity}[/] {finding.path}: {finding.message}",
                                            highlight=False)
        if as_json:
            print(dumps(summary.to_json()))
        else:
            _print_run_summary(summary)


def register(app: typer.Typer) -> None:
    """Add ``run`` to ``app``."""
    app.command()(run)
