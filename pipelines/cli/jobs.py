"""``jbod jobs``: the scheduled jobs declared in ``jobs.yaml`` (:mod:`pipelines.scheduling`) — list, validate, run
one after its dependencies, serve them on their cron schedules, export them to cron or to spark-submit.

:func:`register` adds the group to the ``jbod`` app (``pipelines.cli.main``) and returns it. Its commands need the
app itself — ``jobs run`` runs the job's ``jbod`` command line in this process, and the jobs file is checked against
the app's commands — so they are defined inside :func:`register`, around the app it is given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from jbod_model.errors import InputError
from jbod_model.records.json_codec import dumps
from pipelines.cli import shared
from pipelines.cli.shared import JsonOpt
from pipelines.config.profiles import resolve_config
from pipelines.scheduling.jobs import JOBS_FILE, JobsFile, crontab_lines, describe, load_jobs, run_job, variables

#: The parameters of the ``jbod`` commands that name files a job reads (its INPUT, ``--input``, ``--dirs``,
#: ``--broker-config``): they must exist before the job runs. ``--tables`` is not one: a job creates it.
INPUT_PARAMS = ("inputs", "paths", "dirs", "broker_config")

JobsFileOpt = Annotated[Path, typer.Option("--file", help="The jobs file.")]


def register(app: typer.Typer) -> typer.Typer:
    """Add the ``jobs`` group to ``app``; returns the group."""
    jobs_app = typer.Typer(no_args_is_help=True, rich_markup_mode="rich",
                           help="Scheduled jobs declared in jobs.yaml: list, validate, run, serve on a schedule, "
                                "export to cron or spark-submit (docs/jobs.md).")
    app.add_typer(jobs_app, name="jobs")


    def _command_names() -> list[str]:
        return sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


    def _load_jobs(path: Path) -> JobsFile:
        return load_jobs(path, commands=[c for c in _command_names() if c != "jobs"])


    def _check_inputs(spec: JobsFile, names: list[str], workdir: Path) -> None:
        """Before serving: every file a served job (or a job it depends on) reads must exist now. A missing
        ``$JBOD_HOME/metadata`` is said at start-up, naming the job, not at the first due time hours later."""
        from pipelines.scheduling.jobs import expand_args, run_order  # noqa: PLC0415

        commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
        for job in dict.fromkeys(j for name in names for j in run_order(spec, name)):
            command = commands[spec.jobs[job].command]
            # resilient_parsing: read the arguments into parameters without running or validating anything else.
            ctx = command.make_context(job, expand_args(spec, job), resilient_parsing=True)
            for param in command.params:
                if param.name not in INPUT_PARAMS:
                    continue
                label = param.opts[0] if param.opts[0].startswith("-") else (param.name or "").upper()
                for path in ctx.params.get(param.name) or ():
                    if not (workdir / path).exists():
                        raise InputError(f"job {job!r}: {path} does not exist (its {label}; the jobs run in "
                                         f"{workdir.resolve()})")

    @jobs_app.command("list")
    def jobs_list(file: JobsFileOpt = JOBS_FILE, as_json: JsonOpt = False) -> None:
        """The declared jobs: command, schedule, profile, dependencies."""
        with shared.fail():
            rows = describe(_load_jobs(file))
            if as_json:
                print(dumps(rows))
                return
            table = shared.table(f"Jobs in {file}", "job", "command", "schedule", "profile", "after", "enabled")
            for r in rows:
                table.add_row(r["name"], r["command"], r["schedule"], r["profile"], ", ".join(r["depends_on"]),
                              str(r["enabled"]).lower())
            shared.console().print(table)


    @jobs_app.command("validate")
    def jobs_validate(file: JobsFileOpt = JOBS_FILE) -> None:
        """Check the jobs file: schema, cron expressions, commands, profiles, dependencies (no cycles)."""
        with shared.fail():
            spec = _load_jobs(file)
            shared.console().print(f"{file}: {len(spec.jobs)} jobs, valid.", highlight=False)
            for var, default in variables(spec).items():
                shared.console().print(f"  uses ${{{var}}}"
                                       + (" (must be set)" if default is None else f" (default {default})"),
                                       highlight=False)


    @jobs_app.command("run")
    def jobs_run(name: Annotated[str, typer.Argument(help="The job to run (after its dependencies).")],
                 file: JobsFileOpt = JOBS_FILE) -> None:
        """Run a job and, first, the jobs it depends on — what cron or an orchestrator calls."""
        with shared.fail():
            spec = _load_jobs(file)

            def invoke(argv: list[str]) -> None:
                # standalone_mode=False: click returns a command's exit code instead of exiting the process.
                code = app(args=argv, standalone_mode=False)
                if isinstance(code, int) and code != 0:
                    raise typer.Exit(code)
            run_job(spec, name, invoke, on_start=lambda job, argv: shared.console(stderr=True).print(
                f"[bold]job {job}[/]: jbod {' '.join(argv)}", highlight=False))


    @jobs_app.command("crontab")
    def jobs_crontab(file: JobsFileOpt = JOBS_FILE,
                     workdir: Annotated[Path, typer.Option(help="Directory the jobs run in.")] = Path("."),
                     log_dir: Annotated[Path | None, typer.Option(help="Append each job's output here.")] = None,
                     with_env: Annotated[bool, typer.Option(
                         "--with-env", help="Write the current values of the variables the jobs use as NAME=value "
                                            "lines (cron's own environment is nearly empty).")] = False) -> None:
        """Crontab lines for the scheduled jobs (install with: jbod jobs crontab | crontab -)."""
        import os  # noqa: PLC0415

        from pipelines.cli.spark_submit import jbod_argv  # noqa: PLC0415

        with shared.fail():
            spec = _load_jobs(file)
            for line in crontab_lines(spec, workdir=workdir.resolve(), jbod=jbod_argv(), jobs_file=file.resolve(),
                                      log_dir=log_dir, env=os.environ if with_env else None):
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

        from pipelines.scheduling.scheduler import Scheduler, SubprocessLauncher  # noqa: PLC0415

        with shared.fail():
            spec = _load_jobs(file)
            console = shared.console(stderr=True)
            scheduler = Scheduler(spec, SubprocessLauncher(file, workdir=workdir), log_dir=log_dir, jobs=job,
                                  grace_seconds=grace_seconds, on_event=lambda message: console.print(
                                      f"{datetime.now().astimezone():%Y-%m-%d %H:%M:%S} {message}", highlight=False))
            _check_inputs(spec, scheduler.names, workdir)
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

        from pipelines.cli.spark_submit import spark_submit_argv  # noqa: PLC0415
        from pipelines.scheduling.jobs import run_order  # noqa: PLC0415

        with shared.fail():
            spec = _load_jobs(file)
            run_order(spec, name)  # an unknown job is an error here, not in spark-submit
            config = resolve_config(spec.profile_of(name))
            print(shlex.join(spark_submit_argv(name, jobs_file=file.resolve(), master=config.spark.master,
                                               conf=config.spark.conf)))

    return jobs_app
