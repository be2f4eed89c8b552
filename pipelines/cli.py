"""The ``jbod`` command line: a thin caller of ``jbod_model`` (and of the Spark job in ``pipelines``).

It parses arguments, calls the package, prints with rich, and maps errors to exit codes in one place
(:func:`_fail`): 2 bad input or usage, 3 undecodable bytes or text, 4 a record that cannot be replayed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from jbod_model.controller.context import ControllerConfig
from jbod_model.controller.controller import ReferenceController
from jbod_model.errors import DecodeError, InputError, JbodError, ReplayFault
from jbod_model.image_json import image_to_json
from jbod_model.meta_properties import inventory
from jbod_model.meta_properties import read_file as read_meta_properties
from jbod_model.records.entry import LogEntry
from jbod_model.records.json_codec import dumps, record_to_json
from jbod_model.sources import InputKind, LoadedInput, detect_kind, open_inputs
from jbod_model.storage.dump_format import dump_file
from jbod_model.storage.log_reader import ReadPolicy, read_entries
from jbod_model.stream import StreamEntry, StreamRunner, entry_to_json
from jbod_model.uuid import Uuid
from jbod_model.whatif import what_if_directories_fail
from pipelines.cli_check import register as _register_check
from pipelines.cli_report import register as _register_report
from pipelines.cli_simulate import register as _register_simulate
from pipelines.config import resolve_config
from pipelines.jobs import JOBS_FILE, JobsFile, crontab_lines, describe, load_jobs, run_job

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
          as_json: JsonOpt = False, policy: PolicyOpt = "fail") -> None:
    """Replay INPUT (or read the Delta tables) and print the metadata image: brokers, online dirs, offline replicas.

    With [bold]--json[/] the output is the image JSON contract (docs/image-json.md), the same from a replay and from
    the tables. Requests in a JSONL input are run through the reference controller.
    """
    with _fail():
        if tables is not None:
            if inputs:
                raise InputError("give INPUT or --tables, not both")
            from pipelines.tables import as_of_image  # noqa: PLC0415 - loads pyarrow/deltalake only when asked

            doc = as_of_image(tables, cluster, as_of_offset)
        else:
            if not inputs:
                raise InputError("give INPUT (a metadata dir, segment, snapshot, dump text or JSONL) or --tables DIR")
            if cluster is not None or as_of_offset is not None:
                raise InputError("--cluster and --as-of-offset go with --tables (use --until-offset with INPUT)")
            loaded = open_inputs(inputs, policy=_policy(policy), until_offset=until_offset,
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
         as_json: JsonOpt = False) -> None:
    """The directory inventory from meta.properties (node, path, directory id, cluster) and its validation, as
    Kafka validates a node's log dirs at startup. Exits 1 when a finding is an error."""
    with _fail():
        inv = inventory(paths)
        findings = inv.all_findings
        if as_json:
            print(dumps({
                "directories": [{"nodeId": r.node_id, "path": r.path, "directoryId": str(r.directory_id)
                                 if r.directory_id else None, "clusterId": r.cluster_id, "version": int(r.version)}
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
        if any(str(f.severity) == "error" for f in findings):
            raise typer.Exit(1)


def _directory_id(value: str) -> Uuid:
    """A directory given as its Uuid, or as a log dir path (or its meta.properties) whose directory.id is read."""
    path = Path(value)
    if path.exists():
        meta = read_meta_properties(path / "meta.properties" if path.is_dir() else path)
        if meta.directory_id is None:
            raise InputError(f"{path} has no directory.id in its meta.properties")
        return meta.directory_id
    return Uuid.from_string(value)


@app.command()
def whatif(inputs: InputsArg,
           fail_dir: Annotated[list[str], typer.Option(
               "--fail-dir", help="A directory to fail: its Uuid, or a log dir path / meta.properties holding its "
                                  "directory.id. Repeat for several.", show_default=False)],
           until_offset: Annotated[int | None, typer.Option(
               "--until-offset", help="Ask the question of the image before offset N.")] = None,
           as_json: JsonOpt = False) -> None:
    """What if these disks failed now? Runs the reference controller's directory-failure handling on the image of
    INPUT and lists the partitions that lose a replica, lose their leader, go under min ISR or go offline."""
    with _fail():
        loaded = open_inputs(inputs, until_offset=until_offset)
        runner = _runner(loaded)
        for _event in runner.run(_tracked(loaded.entries, "decoding and replaying")):
            pass
        result = what_if_directories_fail(runner.image, [_directory_id(v) for v in fail_dir])
        if as_json:
            print(dumps({
                "failed": [{"brokerId": b, "directory": str(d)} for b, d in result.failed],
                "records": [record_to_json(r) for r in result.records],
                "partitions": [{"topicId": str(i.topic_id), "topicName": i.topic_name, "partitionId": i.partition_id,
                                "brokerId": i.broker_id, "directory": str(i.directory),
                                "leaderBefore": i.leader_before, "leaderAfter": i.leader_after,
                                "isrBefore": list(i.isr_before), "isrAfter": list(i.isr_after),
                                "minIsr": i.min_isr, "losesLeader": i.loses_leader,
                                "offlineAfter": i.offline_after, "underMinIsrAfter": i.under_min_isr_after}
                               for i in result.impacts]}))
            return
        failed = ", ".join(f"broker {b} {d}" for b, d in result.failed)
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
                       help="Scheduled jobs declared in jobs.yaml: list, validate, run, export to cron.")
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
                 log_dir: Annotated[Path | None, typer.Option(help="Append each job's output here.")] = None) -> None:
    """Crontab lines for the scheduled jobs (install with: jbod jobs crontab | crontab -)."""
    with _fail():
        spec = _load_jobs(file)
        for line in crontab_lines(spec, workdir=workdir.resolve(), jobs_file=file.resolve(), log_dir=log_dir):
            print(line)


# --- the Spark job ---------------------------------------------------------------------------------------------


def _print_run_summary(summary: Any) -> None:
    """Print a :class:`pipelines.job.RunSummary`."""
    console = _console()
    console.print(f"Replayed {summary.rows} output rows in {len(summary.batches)} micro-batches "
                  f"({summary.seconds:.1f} s).", highlight=False)
    for c in summary.clusters:
        console.print(f"[bold]cluster {c.cluster_id}[/]: metadata.version {c.metadata_version}, last offset "
                      f"{c.last_offset}, {c.brokers} brokers, {c.topics} topics, {c.partitions} partitions, "
                      f"{c.replicas} replicas", highlight=False)
        if c.offline_by_broker_dir:
            table = _table("Offline replicas by broker and directory", "broker", "directory", "offline replicas")
            for broker in sorted(c.offline_by_broker_dir):
                for directory, count in sorted(c.offline_by_broker_dir[broker].items()):
                    table.add_row(str(broker), directory, str(count))
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
                                                                            "meta.properties.")] = None,
        max_entries_per_batch: Annotated[int | None, typer.Option("--max-entries-per-batch", min=1,
                                                                  help="Cap each micro-batch (per cluster).")] = None,
        master: Annotated[str | None, typer.Option("--master", help="Spark master URL.")] = None,
        as_json: JsonOpt = False) -> None:
    """Replay KRaft metadata on Spark into Delta tables (structured streaming, stateful, exactly once) and print
    where replicas went offline. With no input, the bundled demo cluster with a disk failure is replayed."""
    # Spark, pandas and Delta load only for this command (about a second): the other commands stay quick.
    from pipelines.job import DEMO_INPUT, run_with_config, stdout_to_stderr  # noqa: PLC0415

    with _fail():
        config = resolve_config(conf, cli={"tables": tables, "cluster_id": cluster_id,
                                           "max_entries_per_batch": max_entries_per_batch, "spark.master": master})
        with stdout_to_stderr():
            summary = run_with_config(inputs or [DEMO_INPUT], config, follow=follow or None)
        if as_json:
            print(dumps(summary.to_json()))
        else:
            _print_run_summary(summary)


# Commands that live in their own modules register themselves on the app.
_register_report(app)
_register_simulate(app)
_register_check(app)


def main() -> None:  # pragma: no cover - console entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
