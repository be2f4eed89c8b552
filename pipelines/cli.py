"""The ``jbod`` command line: a thin caller of ``jbod_model`` (and of the Spark job in ``pipelines``).

It parses arguments, calls the package, prints with rich, and maps errors to exit codes in one place
(:func:`_fail`): 2 bad input or usage, 3 undecodable bytes or text, 4 a record that cannot be replayed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from inspect import getdoc
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from jbod_model.controller.context import ControllerConfig
from jbod_model.controller.controller import ReferenceController
from jbod_model.errors import DecodeError, InputError, JbodError, ReplayFault
from jbod_model.image import EMPTY_IMAGE
from jbod_model.image_json import image_to_json
from jbod_model.meta_properties import DirInventory, inventory
from jbod_model.meta_properties import read_file as read_meta_properties
from jbod_model.records.entry import LogEntry
from jbod_model.records.json_codec import dumps, record_to_json
from jbod_model.replay import replay_entries
from jbod_model.report import DirectoryPaths, format_directory
from jbod_model.sources import InputKind, LoadedInput, detect_kind, open_inputs
from jbod_model.storage.dump_format import dump_file
from jbod_model.storage.log_reader import ReadPolicy, read_entries
from jbod_model.stream import StreamEntry, StreamRunner, entry_to_json
from jbod_model.uuid import Uuid
from jbod_model.whatif import what_if_directories_fail
from pipelines.cli_check import register as _register_check
from pipelines.cli_maintain import register as _register_maintain
from pipelines.cli_notebook import register as _register_notebook
from pipelines.cli_report import check_source, directory_paths_for, load_paths, resolve_as_of
from pipelines.cli_report import register as _register_report
from pipelines.cli_simulate import register as _register_simulate
from pipelines.config import resolve_config
from pipelines.jobs import JOBS_FILE, JobsFile, crontab_lines, describe, load_jobs, run_job, variables

app = typer.Typer(no_args_is_help=True, rich_markup_mode="rich", add_completion=False,
                  help="Replay KRaft metadata with JBOD log directories (KIP-858): where every replica lives, "
                       "which went offline, on which disk, when and why.")


def _console(*, stderr: bool = False) -> Console:
    # Built per use so the terminal width (COLUMNS) is read when printing, not at import.
    return Console(stderr=stderr, soft_wrap=True)


EXIT_INPUT, EXIT_DECODE, EXIT_REPLAY = 2, 3, 4

InputsArg = Annotated[list[Path], typer.Argument(
    help="A node's metadata log dir (or several nodes' copies of one cluster), segment(s) <offset>.log, a "
         "snapshot <offset>-<epoch>.checkpoint, kafka-dump-log text, or canonical JSONL.", show_default=False)]
PolicyOpt = Annotated[str, typer.Option("--policy", help="On undecodable input: 'fail', or 'skip' it and report "
                                                         "what was skipped (every good record is kept).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON instead of tables.")]
AsOfOpt = Annotated[str | None, typer.Option(
    "--as-of", help="With --tables: as of a time (ISO 8601, UTC unless it says otherwise): the last offset whose "
                    "batch was appended by then.", metavar="TIME", show_default=False)]


def _policy(value: str) -> ReadPolicy:
    if value not in ("fail", "skip"):
        raise InputError(f"--policy must be 'fail' or 'skip', not {value!r}")
    return "fail" if value == "fail" else "skip"


@contextmanager
def _fail() -> Iterator[None]:
    """The one place that turns model errors into messages and exit codes."""
    try:
        yield
    except ReplayFault as e:
        _console(stderr=True).print(f"[bold red]replay fault:[/] {e}", highlight=False)
        raise typer.Exit(EXIT_REPLAY) from None
    except DecodeError as e:
        _console(stderr=True).print(f"[bold red]cannot decode:[/] {e}", highlight=False)
        raise typer.Exit(EXIT_DECODE) from None
    except (InputError, JbodError) as e:
        _console(stderr=True).print(f"[bold red]error:[/] {e}", highlight=False)
        raise typer.Exit(EXIT_INPUT) from None


def _tracked(entries: Iterable[StreamEntry], what: str) -> Iterator[StreamEntry]:
    """Entries as they are read, with a live count on a terminal's stderr (decode and replay of a large log take
    minutes; a silent terminal looks hung). Nothing is drawn when stderr is not a terminal, so pipes stay clean."""
    console = _console(stderr=True)
    if not console.is_terminal:
        yield from entries
        return
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TextColumn("{task.completed:,} entries"),
               TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task(what, total=None)
        for i, entry in enumerate(entries, start=1):
            if i % 1024 == 0:
                progress.update(task, completed=i)
            yield entry


@contextmanager
def _batch_progress() -> Iterator[Callable[[Any], None]]:
    """A callback for the Spark job's micro-batches (:class:`pipelines.job.BatchStats`): a live line on a terminal's
    stderr, else one line per batch on stderr (a scheduled job's log shows how far a long replay got)."""
    console = _console(stderr=True)
    done = {"batches": 0, "rows": 0}

    def line(stats: Any) -> str:
        done["batches"] += 1
        done["rows"] += stats.rows
        return (f"micro-batch {stats.batch_id}: {stats.rows:,} rows in {stats.seconds:.1f} s "
                f"(replay {stats.compute_seconds:.1f} s, Delta writes {stats.seconds - stats.compute_seconds:.1f} s); "
                f"{done['batches']} batches, {done['rows']:,} rows so far")

    if not console.is_terminal:
        yield lambda stats: console.print(line(stats), highlight=False)
        return
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("replaying on Spark: waiting for the first micro-batch", total=None)
        yield lambda stats: progress.update(task, description=line(stats))


def _runner(loaded: LoadedInput, cluster_id: str | None = None) -> StreamRunner:
    """A stream runner whose controller starts from the input's base image (a snapshot, or empty)."""
    return StreamRunner(ReferenceController(loaded.base_image, ControllerConfig(cluster_id=cluster_id)))


def _report_skips(loaded: LoadedInput) -> None:
    if not loaded.report.clean:
        _console(stderr=True).print(f"[yellow]skipped:[/] {loaded.report.summary()}", highlight=False)
    for reader in loaded.dump_readers:
        report = reader.report()
        for problem in report.problems:
            _console(stderr=True).print(f"[yellow]skipped:[/] {problem}", highlight=False)


def _table(title: str, *columns: str) -> Table:
    """A table whose cells wrap rather than truncate: a directory id cut to 'AAAA…' is useless to an operator."""
    table = Table(title=title, title_justify="left")
    for col in columns:
        table.add_column(col, overflow="fold")
    return table


def _print_image(doc: dict[str, Any]) -> None:
    """The image JSON contract (docs/image-json.md) as terminal tables: it is the one shape every source gives."""
    _console().print(f"metadata.version [bold]{doc['metadataVersion']}[/] (level {doc['featureLevel']}), "
                     f"last offset {doc['lastOffset']}, {len(doc['topics'])} topics, {len(doc['partitions'])} "
                     f"partitions, {len(doc['replicas'])} replicas", highlight=False)
    brokers = _table("Brokers", "broker", "epoch", "fenced", "controlled shutdown", "online log dirs")
    for b in doc["brokers"]:
        brokers.add_row(str(b["brokerId"]), str(b["brokerEpoch"]), str(b["fenced"]).lower(),
                        str(b["inControlledShutdown"]).lower(), "\n".join(b["logDirs"]) or "(all: pre-3.7-IV2)")
    _console().print(brokers)
    names = {t["topicId"]: t["name"] for t in doc["topics"]}
    offline = [r for r in doc["replicas"] if r["offline"]]
    if not offline:
        _console().print("No offline replicas.")
        return
    table = _table(f"Offline replicas ({len(offline)})", "topic", "partition", "broker", "directory", "state",
                   "reason")
    for r in offline:
        table.add_row(names.get(r["topicId"], r["topicId"]), str(r["partitionId"]), str(r["brokerId"]),
                      r["directory"], r["directoryState"], r["offlineReason"] or "")
    _console().print(table)


@app.command()
def image(inputs: Annotated[list[Path] | None, typer.Argument(
              help="A node's metadata log dir (or several nodes' copies of one cluster), segment(s) <offset>.log, a "
                   "snapshot <offset>-<epoch>.checkpoint, kafka-dump-log text, or canonical JSONL. Not with "
                   "--tables.", show_default=False)] = None,
          until_offset: Annotated[int | None, typer.Option(
              "--until-offset", help="Replay only records with offset < N (Kafka's snapshot end-offset "
                                     "convention).")] = None,
          full_log: Annotated[bool, typer.Option(
              "--full-log", help="For a metadata dir: replay the whole log instead of the latest snapshot plus "
                                 "the log after it.")] = False,
          tables: Annotated[Path | None, typer.Option(
              "--tables", help="Read the image from the Spark job's Delta tables instead of replaying INPUT.")]
          = None,
          cluster: Annotated[str | None, typer.Option(
              "--cluster", help="With --tables: the cluster (optional when the tables hold one).")] = None,
          as_of_offset: Annotated[int | None, typer.Option(
              "--as-of-offset", help="With --tables: the state as of offset N (records with offset <= N); default: "
                                     "the latest.")] = None,
          as_of: AsOfOpt = None,
          as_json: JsonOpt = False, policy: PolicyOpt = "fail") -> None:
    """Replay INPUT (or read the Delta tables) and print the metadata image: brokers, online dirs, offline replicas.

    With [bold]--json[/] the output is the image JSON contract (docs/image-json.md), the same from a replay and from
    the tables. Requests in a JSONL input are run through the reference controller.
    """
    with _fail():
        check_source(inputs, tables, tables_only={"--cluster": cluster, "--as-of-offset": as_of_offset,
                                                  "--as-of": as_of},
                     input_only={"--until-offset": until_offset, "--full-log": full_log,
                                 "--policy": None if policy == "fail" else policy})
        if tables is not None:
            from pipelines.tables import as_of_image, resolve_cluster  # noqa: PLC0415 - pyarrow/deltalake when asked

            cid = resolve_cluster(tables, cluster)
            doc = as_of_image(tables, cid, resolve_as_of(tables, cid, as_of_offset, as_of))
        else:
            loaded = open_inputs(inputs or [], policy=_policy(policy), until_offset=until_offset,
                                 from_snapshot=not full_log)
            runner = _runner(loaded)
            for _event in runner.run(_tracked(loaded.entries, "decoding and replaying")):
                pass  # requests in JSONL inputs are run; only the final image is printed here
            _report_skips(loaded)
            doc = image_to_json(runner.image)
        if as_json:
            print(dumps(doc))
        else:
            _print_image(doc)


@app.command()
def controller(inputs: InputsArg,
               cluster_id: Annotated[str | None, typer.Option(
                   "--cluster-id", help="The controller's cluster id; without it any registration's cluster id "
                                        "is accepted.")] = None,
               as_json: JsonOpt = False) -> None:
    """Run a mixed stream of committed records and controller requests through the reference controller.

    Prints one JSON line per request — {"offset", "type", "response", "records"} — then the final image (a JSON
    line with [bold]--json[/], tables otherwise).
    """
    with _fail():
        loaded = open_inputs(inputs)
        runner = _runner(loaded, cluster_id)
        for event in runner.run(_tracked(loaded.entries, "running the controller")):
            print(dumps(event.to_json()))
        doc = image_to_json(runner.image)
        if as_json:
            print(dumps(doc))
        else:
            _print_image(doc)


@app.command()
def inspect(path: Annotated[Path, typer.Argument(help="A segment, snapshot, bootstrap.checkpoint, dump text or "
                                                      "JSONL file.", show_default=False)],
            as_json: Annotated[bool, typer.Option(
                "--json", help="Canonical JSONL (one record per line, with offsets) instead of dump-log text.")]
            = False,
            policy: PolicyOpt = "fail") -> None:
    """Print the records of a file the way kafka-dump-log --cluster-metadata-decoder does, or as JSONL."""
    with _fail():
        kind = detect_kind(path)
        pol = _policy(policy)
        if kind in (InputKind.SEGMENT, InputKind.SNAPSHOT, InputKind.BOOTSTRAP):
            if as_json:
                for entry in read_entries(path, policy=pol):
                    if isinstance(entry, LogEntry):  # control records are not metadata records
                        print(dumps(entry_to_json(entry)))
            else:
                for line in dump_file(path, policy=pol):
                    print(line)
            return
        if kind is InputKind.METADATA_DIR:
            raise InputError(f"{path} is a directory: inspect one file (or use 'jbod image {path}')")
        loaded = open_inputs([path], policy=pol)
        for item in loaded.entries:
            print(dumps(entry_to_json(item)))
        _report_skips(loaded)


@app.command()
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
    with _fail():
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
            table = _table("Log directories", "node", "path", "directory id", "cluster id", "version")
            for r in inv.rows:
                table.add_row(str(r.node_id), r.path, str(r.directory_id or "(none)"), r.cluster_id or "",
                              str(int(r.version)))
            _console().print(table)
            for f in findings:
                colour = "red" if str(f.severity) == "error" else "yellow"
                _console().print(f"[{colour}]{f.severity}[/] {f.path}: {f.message}", highlight=False)
        if tables is not None:
            _load_inventory(tables, inv, cluster_id)
        if any(str(f.severity) == "error" for f in findings):
            raise typer.Exit(1)


def _load_inventory(tables: Path, inv: DirInventory, cluster_id: str | None) -> None:
    """Load ``inv`` into ``dir_inventory`` and say so on stderr (stdout may be JSON)."""
    from pipelines.tables import DIR_INVENTORY, load_dir_inventory  # noqa: PLC0415 - pyarrow/deltalake

    if not inv.rows:
        raise InputError("no meta.properties found: nothing to load into the dir_inventory table")
    loaded = load_dir_inventory(tables, inv, cluster_id=cluster_id)
    for cid, n in loaded.items():
        _console(stderr=True).print(f"Loaded {n} directories of cluster {cid} into {tables / DIR_INVENTORY}.",
                                    highlight=False)


def _directory_id(value: str, paths: DirectoryPaths | None = None, online: frozenset[Uuid] = frozenset()) -> Uuid:
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


@app.command()
def whatif(inputs: Annotated[list[Path] | None, typer.Argument(
               help="A node's metadata log dir (or several nodes' copies of one cluster), segment(s) <offset>.log, a "
                    "snapshot <offset>-<epoch>.checkpoint, kafka-dump-log text, or canonical JSONL. Not with "
                    "--tables.", show_default=False)] = None,
           fail_dir: Annotated[list[str] | None, typer.Option(
               "--fail-dir", help="A directory to fail: its Uuid, a log dir path / meta.properties here holding its "
                                  "directory.id, or a disk's path on its broker as the inventory (--dirs, "
                                  "dir_inventory) names it, NODE:PATH when several brokers have it. Repeat for "
                                  "several.", show_default=False)] = None,
           until_offset: Annotated[int | None, typer.Option(
               "--until-offset", help="Ask the question of the image before offset N.")] = None,
           tables: Annotated[Path | None, typer.Option(
               "--tables", help="Read the log from the Spark job's Delta tables instead of INPUT (disks are named "
                                "from its dir_inventory table).", show_default=False)] = None,
           cluster: Annotated[str | None, typer.Option(
               "--cluster", help="With --tables: the cluster (optional when the tables hold one).",
               show_default=False)] = None,
           as_of_offset: Annotated[int | None, typer.Option(
               "--as-of-offset", help="With --tables: ask the question of the state as of offset N (records with "
                                      "offset <= N); default: the latest.", show_default=False)] = None,
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
    with _fail():
        check_source(inputs, tables, tables_only={"--cluster": cluster, "--as-of-offset": as_of_offset,
                                                  "--as-of": as_of},
                     input_only={"--until-offset": until_offset})
        if not fail_dir:
            raise InputError("name the disks to fail with --fail-dir (repeat for several)")
        explicit, _inv = load_paths(dirs, as_root=as_root)
        if tables is not None:
            from pipelines.tables import log_entries, resolve_cluster  # noqa: PLC0415 - pyarrow/deltalake

            cid = resolve_cluster(tables, cluster)
            base, entries = log_entries(tables, cid, resolve_as_of(tables, cid, as_of_offset, as_of))
            records = (e for e in _tracked(entries, "decoding and replaying") if isinstance(e, LogEntry))
            image = replay_entries(records, base if base is not None else EMPTY_IMAGE)
            paths = directory_paths_for(tables, cid, explicit)
        else:
            loaded = open_inputs(inputs or [], until_offset=until_offset)
            runner = _runner(loaded)
            for _event in runner.run(_tracked(loaded.entries, "decoding and replaying")):
                pass
            image, paths = runner.image, explicit
        online = frozenset(d for b in image.cluster.brokers.values() for d in b.directories)
        result = what_if_directories_fail(image, [_directory_id(v, paths, online) for v in fail_dir])

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
        _console().print(f"If {failed} failed now: {len(result.impacts)} replicas lose their disk, "
                         f"{len(result.lose_leader)} partitions lose their leader, {len(result.go_offline)} go "
                         f"offline, {len(result.go_under_min_isr)} go under min ISR "
                         f"({len(result.records)} records).", highlight=False)
        table = _table("Affected partitions", "topic", "partition", "broker", "leader before → after",
                       "ISR before → after", "min ISR", "outcome")
        for i in result.impacts:
            outcome = ("OFFLINE" if i.offline_after else "leader moves" if i.loses_leader else
                       "under min ISR" if i.under_min_isr_after else "loses a follower")
            table.add_row(i.topic_name, str(i.partition_id), str(i.broker_id), f"{i.leader_before} → {i.leader_after}",
                          f"{list(i.isr_before)} → {list(i.isr_after)}", str(i.min_isr), outcome)
        _console().print(table)


jobs_app = typer.Typer(no_args_is_help=True, rich_markup_mode="rich",
                       help="Scheduled jobs declared in jobs.yaml: list, validate, run, serve on a schedule, export to "
                            "cron or spark-submit (docs/jobs.md).")
app.add_typer(jobs_app, name="jobs")
JobsFileOpt = Annotated[Path, typer.Option("--file", help="The jobs file.")]


def _command_names() -> list[str]:
    return sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def _load_jobs(path: Path) -> JobsFile:
    return load_jobs(path, commands=[c for c in _command_names() if c != "jobs"])


@jobs_app.command("list")
def jobs_list(file: JobsFileOpt = JOBS_FILE, as_json: JsonOpt = False) -> None:
    """The declared jobs: command, schedule, profile, dependencies."""
    with _fail():
        rows = describe(_load_jobs(file))
        if as_json:
            print(dumps(rows))
            return
        table = _table(f"Jobs in {file}", "job", "command", "schedule", "profile", "after", "enabled")
        for r in rows:
            table.add_row(r["name"], r["command"], r["schedule"], r["profile"], ", ".join(r["depends_on"]),
                          str(r["enabled"]).lower())
        _console().print(table)


@jobs_app.command("validate")
def jobs_validate(file: JobsFileOpt = JOBS_FILE) -> None:
    """Check the jobs file: schema, cron expressions, commands, profiles, dependencies (no cycles)."""
    with _fail():
        spec = _load_jobs(file)
        _console().print(f"{file}: {len(spec.jobs)} jobs, valid.", highlight=False)
        for var, default in variables(spec).items():
            _console().print(f"  uses ${{{var}}}" + (" (must be set)" if default is None else f" (default {default})"),
                             highlight=False)


@jobs_app.command("run")
def jobs_run(name: Annotated[str, typer.Argument(help="The job to run (after its dependencies).")],
             file: JobsFileOpt = JOBS_FILE) -> None:
    """Run a job and, first, the jobs it depends on — what cron or an orchestrator calls."""
    with _fail():
        spec = _load_jobs(file)

        def invoke(argv: list[str]) -> None:
            # standalone_mode=False: click returns a command's exit code instead of exiting the process.
            code = app(args=argv, standalone_mode=False)
            if isinstance(code, int) and code != 0:
                raise typer.Exit(code)
        run_job(spec, name, invoke, on_start=lambda job, argv: _console(stderr=True).print(
            f"[bold]job {job}[/]: jbod {' '.join(argv)}", highlight=False))


@jobs_app.command("crontab")
def jobs_crontab(file: JobsFileOpt = JOBS_FILE,
                 workdir: Annotated[Path, typer.Option(help="Directory the jobs run in.")] = Path("."),
                 log_dir: Annotated[Path | None, typer.Option(help="Append each job's output here.")] = None,
                 with_env: Annotated[bool, typer.Option(
                     "--with-env", help="Write the current values of the variables the jobs use as NAME=value lines "
                                        "(cron's own environment is nearly empty).")] = False) -> None:
    """Crontab lines for the scheduled jobs (install with: jbod jobs crontab | crontab -)."""
    import os  # noqa: PLC0415

    with _fail():
        spec = _load_jobs(file)
        for line in crontab_lines(spec, workdir=workdir.resolve(), jobs_file=file.resolve(), log_dir=log_dir,
                                  env=os.environ if with_env else None):
            print(line)


@jobs_app.command("serve")
def jobs_serve(file: JobsFileOpt = JOBS_FILE,
               log_dir: Annotated[Path, typer.Option(help="Each run's output goes to <log-dir>/<job>/<time>.log, "
                                                          "and one line per run to <log-dir>/runs.jsonl.")
                                  ] = Path("logs/jobs"),
               job: Annotated[list[str] | None, typer.Option(
                   "--job", help="Serve only this job (repeat for several; default: every scheduled, enabled job).",
                   show_default=False)] = None,
               once: Annotated[bool, typer.Option(
                   "--once", help="Wait for the next due time, run what is due, wait for it, exit (1 if a run "
                                  "failed).")] = False,
               workdir: Annotated[Path, typer.Option(help="Directory the jobs run in.")] = Path("."),
               grace_seconds: Annotated[float, typer.Option(
                   "--grace-seconds", min=0, help="On SIGTERM/SIGINT: how long running jobs get to stop before "
                                                  "they are killed.")] = 30.0) -> None:
    """Run the scheduled jobs at their cron times on this machine, each in its own process (`jbod jobs run NAME`),
    never two overlapping runs at once; SIGTERM or Ctrl-C stops cleanly. For cron instead: `jbod jobs crontab`."""
    import signal  # noqa: PLC0415
    from datetime import datetime  # noqa: PLC0415

    from pipelines.scheduler import Scheduler, SubprocessLauncher  # noqa: PLC0415

    with _fail():
        spec = _load_jobs(file)
        console = _console(stderr=True)
        scheduler = Scheduler(spec, SubprocessLauncher(file, workdir=workdir), log_dir=log_dir, jobs=job,
                              grace_seconds=grace_seconds, on_event=lambda message: console.print(
                                  f"{datetime.now().astimezone():%Y-%m-%d %H:%M:%S} {message}", highlight=False))
        # The handler only sets a flag: the loop notices it, stops scheduling and ends the running jobs itself.
        handlers = {sig: signal.signal(sig, lambda _sig, _frame: scheduler.stop())
                    for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            runs = scheduler.serve(once=once)
        finally:
            for sig, previous in handlers.items():
                signal.signal(sig, previous)
    if once and any(r.status == "failed" for r in runs):
        raise typer.Exit(1)


@jobs_app.command("spark-submit")
def jobs_spark_submit(name: Annotated[str, typer.Argument(help="The job (run after its dependencies).")],
                      file: JobsFileOpt = JOBS_FILE) -> None:
    """Print the spark-submit command line that runs a job (and its dependencies) on the master of its profile;
    spark-submit's settings then win over the profile's spark.* (docs/jobs.md)."""
    import shlex  # noqa: PLC0415

    from pipelines.jobs import run_order  # noqa: PLC0415
    from pipelines.submit import spark_submit_argv  # noqa: PLC0415

    with _fail():
        spec = _load_jobs(file)
        run_order(spec, name)  # an unknown job is an error here, not in spark-submit
        config = resolve_config(spec.profile_of(name))
        print(shlex.join(spark_submit_argv(name, jobs_file=file.resolve(), master=config.spark.master,
                                           conf=config.spark.conf)))


# --- the Spark job ---------------------------------------------------------------------------------------------


#: The bundled demo's disks: a copy of each broker's filesystem root (``broker-<id>/mnt/d<n>/meta.properties``),
#: loaded into ``dir_inventory`` by a ``jbod run`` without ``--input`` so that its failed disk shows by path.
DEMO_LOG_DIRS = Path(__file__).resolve().parent / "examples" / "demo-log-dirs"
#: The demo's cluster id (its registrations' clusterId, its meta.properties' cluster.id): the demo JSONL has no
#: meta.properties beside it, so the default run names its cluster this way to join it with its disks.
DEMO_CLUSTER_ID = "JbodDemoCluster0000001"


def _print_run_summary(summary: Any) -> None:
    """Print a :class:`pipelines.job.RunSummary`; disks by path where ``dir_inventory`` knows them."""
    from pipelines.tables import directory_paths  # noqa: PLC0415 - pyarrow/deltalake, loaded by `run` anyway

    console = _console()
    console.print(f"Replayed {summary.rows} output rows in {len(summary.batches)} micro-batches "
                  f"({summary.seconds:.1f} s).", highlight=False)
    for c in summary.clusters:
        console.print(f"[bold]cluster {c.cluster_id}[/]: metadata.version {c.metadata_version}, last offset "
                      f"{c.last_offset}, {c.brokers} brokers, {c.topics} topics, {c.partitions} partitions, "
                      f"{c.replicas} replicas", highlight=False)
        if c.offline_by_broker_dir:
            paths = directory_paths(summary.tables_dir, c.cluster_id)
            table = _table("Offline replicas by broker and directory", "broker", "directory", "offline replicas")
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
            console.print("Leaderless partitions: " + ", ".join(f"{t}-{p}" for t, p in c.leaderless),
                          highlight=False)
        else:
            console.print("No leaderless partition.")
        for gap in c.gaps:
            console.print(f"[yellow]log gap:[/] {gap}", highlight=False)
        for fault in c.faults:
            console.print(f"[bold red]replay stopped:[/] {fault}", highlight=False)
    console.print(f"Tables: {summary.tables_dir} (checkpoint {summary.checkpoint_dir}). Read them through the Delta "
                  "log, e.g. pipelines.tables.as_of_image or deltalake.DeltaTable.", highlight=False)


@app.command()
def run(inputs: Annotated[list[Path] | None, typer.Option(
            "--input", "-i", help="Metadata log dirs (or a directory of them), canonical JSONL, kafka-dump-log text; "
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
        max_entries_per_batch: Annotated[int | None, typer.Option("--max-entries-per-batch", min=1,
                                                                  help="Cap each micro-batch (per cluster).")] = None,
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
        policy: Annotated[str | None, typer.Option(
            "--policy", help="On undecodable input: 'fail' (naming the file and offsets), or 'skip' it, keep every "
                             "good record and write a log_gaps row per skipped range (profile: read_policy, "
                             "fail).", show_default=False)] = None,
        as_json: JsonOpt = False) -> None:
    """Replay KRaft metadata on Spark into Delta tables (structured streaming, stateful, exactly once) and print
    where replicas went offline. With no input, the bundled demo cluster with a disk failure is replayed, and its
    disks' meta.properties are loaded into dir_inventory."""
    # Spark, pandas and Delta load only for this command (about a second): the other commands stay quick.
    from pipelines.job import DEMO_INPUT, run_with_config, stdout_to_stderr  # noqa: PLC0415

    with _fail():
        config = resolve_config(conf, cli={"tables": tables, "cluster_id": cluster_id,
                                           "max_entries_per_batch": max_entries_per_batch, "buckets": buckets,
                                           "spark.master": master,
                                           "read_policy": None if policy is None else _policy(policy)})
        if inputs is None:
            # The demo: its cluster named as its disks name it, each broker's copy read as that broker's root.
            if config.cluster_id is None:
                config = config.model_copy(update={"cluster_id": DEMO_CLUSTER_ID})
            if dirs is None:
                dirs, as_root = sorted(p for p in DEMO_LOG_DIRS.iterdir() if p.is_dir()), True
        # Read before the run: a wrong path fails now, not after minutes of Spark.
        inv = inventory(dirs, as_root=as_root) if dirs else None
        if inv is not None and not inv.rows:
            raise InputError(f"no meta.properties found under {', '.join(str(d) for d in dirs or [])}")
        with stdout_to_stderr(), _batch_progress() as on_batch:
            summary = run_with_config(inputs or [DEMO_INPUT], config, follow=follow or None, on_batch=on_batch)
        if inv is not None:
            _load_inventory(config.tables, inv, config.cluster_id)
            for finding in inv.all_findings:
                _console(stderr=True).print(f"[yellow]{finding.severity}[/] {finding.path}: {finding.message}",
                                            highlight=False)
        if as_json:
            print(dumps(summary.to_json()))
        else:
            _print_run_summary(summary)


# Commands that live in their own modules register themselves on the app.
_register_report(app)
_register_simulate(app)
_register_check(app)
_register_maintain(app)
_register_notebook(app)


def _one_line_short_helps(*apps: typer.Typer) -> None:
    """Each command's line in ``jbod --help``: its docstring's first paragraph joined into one line. (In rich markup
    mode typer keeps the docstring's line breaks, so a paragraph wrapped at 120 columns in the source would be
    broken again, mid-sentence, in the command list.)"""
    for sub in apps:
        for info in sub.registered_commands:
            if info.short_help is None and info.callback is not None:
                doc = info.help or getdoc(info.callback) or ""
                info.short_help = " ".join(doc.split("\n\n")[0].split())


_one_line_short_helps(app, jobs_app)


def main() -> None:  # pragma: no cover - console entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
