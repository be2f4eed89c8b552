"""An in-process scheduler for one machine (``jbod jobs serve``): runs the scheduled jobs of ``jobs.yaml`` at their
cron times, each as ``jbod jobs run NAME`` in a subprocess.

Rules (docs/jobs.md):

* **One process per run.** A job's crash, its Spark session or a JVM that will not die cannot take the scheduler
  down; its output (stdout and stderr) goes to ``<log dir>/<job>/<scheduled time>.log`` and every run ends with a
  line in ``<log dir>/runs.jsonl``.
* **No overlap.** A run covers the job *and its dependencies* (``jobs run`` runs them first), so two runs overlap
  when their chains share a job — the same job, or e.g. ``check`` (after ``ingest``) while ``ingest`` runs: both
  would write the same tables. A run due while an overlapping one is in flight waits for it; at most one run of a
  job waits, and ticks that come while it waits are dropped (``skipped`` in ``runs.jsonl``).
* **Missed ticks coalesce.** After a long run or a suspended machine, a job runs once, not once per missed tick; the
  next time is computed from the current time.
* **Clean stop.** :meth:`Scheduler.stop` (SIGTERM or SIGINT in the CLI) stops scheduling, sends SIGTERM to the
  running jobs' process groups, waits ``grace_seconds`` and kills what is left. A Spark job stopped that way loses
  nothing: its next run restarts from the checkpoint and its Delta commits are exactly-once.

The clock (:class:`Clock`) and the launcher (:data:`Launcher`) are injected, so tests drive many cron ticks
without waiting for real minutes.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from croniter import croniter

from jbod_model.errors import InputError
from pipelines.scheduling.jobs import JobsFile, run_order


class Clock(Protocol):
    """Time as the scheduler sees it."""

    def now(self) -> datetime:
        """The current time, timezone-aware (cron schedules are in local time, like cron's)."""

    def wait(self, seconds: float, wake: threading.Event) -> None:
        """Sleep ``seconds``, or less if ``wake`` is set."""


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now().astimezone()

    def wait(self, seconds: float, wake: threading.Event) -> None:
        wake.wait(max(0.0, seconds))


class RunHandle(Protocol):
    """A launched run."""

    def poll(self) -> int | None:
        """The exit code, or None while it runs."""

    def terminate(self) -> None: ...

    def kill(self) -> None: ...


#: Starts job ``name`` with its output going to the log file; returns a handle on the run.
Launcher = Callable[[str, Path], RunHandle]


class ProcessHandle:
    """A run in a subprocess that leads its own process group, so signals reach the JVM and Python workers it
    starts too."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process

    @property
    def pid(self) -> int:
        return self.process.pid

    def poll(self) -> int | None:
        return self.process.poll()

    def _signal(self, sig: signal.Signals) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):  # it ended in between
                os.killpg(self.process.pid, sig)

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)


#: The folder that holds the ``pipelines`` package this scheduler runs from.
PACKAGE_ROOT = Path(__file__).resolve().parents[2]


class SubprocessLauncher:
    """Runs ``python -m pipelines.cli jobs run NAME --file FILE`` (this interpreter) in ``workdir``; ``command``
    replaces that command line (name → argv). The jobs import the same ``pipelines`` package as the scheduler,
    whatever ``workdir`` is: its folder leads ``PYTHONPATH`` in their environment."""

    def __init__(self, jobs_file: Path, *, workdir: Path | None = None,
                 command: Callable[[str], list[str]] | None = None) -> None:
        self.jobs_file = jobs_file.resolve()
        self.workdir = workdir
        self.command = command or self.default_command

    def default_command(self, name: str) -> list[str]:
        return [sys.executable, "-m", "pipelines.cli", "jobs", "run", name, "--file", str(self.jobs_file)]

    def __call__(self, name: str, log: Path) -> ProcessHandle:
        log.parent.mkdir(parents=True, exist_ok=True)
        path = os.pathsep.join(p for p in (str(PACKAGE_ROOT), os.environ.get("PYTHONPATH")) if p)
        with log.open("ab") as out:
            process = subprocess.Popen(self.command(name), stdout=out, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, cwd=self.workdir, start_new_session=True,
                                       env={**os.environ, "PYTHONPATH": path})
        return ProcessHandle(process)


@dataclass
class Run:
    """One scheduled run of a job."""

    job: str
    scheduled: datetime
    log: Path
    #: ``pending`` (due, waiting for an overlapping run), ``running``, then ``ok``, ``failed`` (exit code ≠ 0),
    #: ``stopped`` (ended by a stop) or ``skipped`` (a tick dropped while a run of the job was already waiting).
    status: str = "pending"
    started: datetime | None = None
    finished: datetime | None = None
    exit_code: int | None = None
    handle: RunHandle | None = field(default=None, repr=False, compare=False)
    #: Whether "waits for …" was said already (once per run, not on every poll).
    announced: bool = field(default=False, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        def iso(t: datetime | None) -> str | None:
            return None if t is None else t.isoformat(timespec="seconds")

        seconds = (None if self.started is None or self.finished is None
                   else round((self.finished - self.started).total_seconds(), 3))
        return {"job": self.job, "status": self.status, "scheduled": iso(self.scheduled), "started": iso(self.started),
                "finished": iso(self.finished), "seconds": seconds, "exitCode": self.exit_code,
                "log": str(self.log)}


class Scheduler:
    """Runs the scheduled, enabled jobs of ``spec`` (or the ``jobs`` named) at their cron times."""

    def __init__(self, spec: JobsFile, launcher: Launcher, *, log_dir: Path, clock: Clock | None = None,
                 jobs: Sequence[str] | None = None, poll_seconds: float = 1.0, grace_seconds: float = 30.0,
                 on_event: Callable[[str], None] | None = None) -> None:
        scheduled = {n for n, j in spec.jobs.items() if j.enabled and j.schedule is not None}
        for name in jobs or ():
            if name not in spec.jobs:
                raise InputError(f"Unknown job {name!r} (jobs: {', '.join(sorted(spec.jobs))})")
            if name not in scheduled:
                raise InputError(f"Job {name!r} has no schedule or is disabled: nothing to serve")
        self.names = sorted(set(jobs) if jobs else scheduled)
        if not self.names:
            raise InputError("No enabled job has a schedule: nothing to serve")
        self.spec = spec
        self.launcher = launcher
        self.log_dir = log_dir
        self.clock: Clock = clock or SystemClock()
        self.poll_seconds = poll_seconds
        self.grace_seconds = grace_seconds
        self.on_event = on_event or (lambda _message: None)
        self.chains = {n: frozenset(run_order(spec, n)) for n in self.names}
        self.history: list[Run] = []
        self.pending: dict[str, Run] = {}
        self.running: dict[str, Run] = {}
        self.next_due: dict[str, datetime] = {}
        self._stop = threading.Event()

    # -- control --

    def stop(self) -> None:
        """Stop serving (safe to call from a signal handler or another thread)."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    # -- one step --

    def _next_time(self, name: str, after: datetime) -> datetime:
        schedule = self.spec.jobs[name].schedule
        assert schedule is not None  # only scheduled jobs are served
        return croniter(schedule, after).get_next(datetime)

    def _record(self, run: Run) -> None:
        self.history.append(run)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with (self.log_dir / "runs.jsonl").open("a") as f:
            f.write(json.dumps(run.to_json(), sort_keys=True) + "\n")

    def _reap(self, now: datetime) -> None:
        for name, run in list(self.running.items()):
            assert run.handle is not None
            code = run.handle.poll()
            if code is None:
                continue
            run.finished, run.exit_code = now, code
            if run.status == "running":
                run.status = "ok" if code == 0 else "failed"
            del self.running[name]
            self._record(run)
            self.on_event(f"{name}: {run.status} (exit {code}) after "
                          f"{(now - (run.started or now)).total_seconds():.0f} s; log {run.log}")

    def _queue_due(self, now: datetime) -> None:
        for name in self.names:
            due = self.next_due[name]
            if due > now:
                continue
            self.next_due[name] = self._next_time(name, now)
            if name in self.pending:
                skipped = Run(name, due, self.pending[name].log, status="skipped")
                self._record(skipped)
                self.on_event(f"{name}: tick {due:%H:%M} skipped, a run is already waiting")
                continue
            log = self.log_dir / name / f"{due:%Y%m%dT%H%M%S}.log"
            self.pending[name] = Run(name, due, log)

    def _launch_pending(self, now: datetime) -> None:
        # Oldest tick first; at the same tick, shorter chains first, so a job starts before the jobs that run it
        # as a dependency (ingest before check).
        for run in sorted(self.pending.values(), key=lambda r: (r.scheduled, len(self.chains[r.job]), r.job)):
            if self.stopping:  # a stop may come while starting runs (a signal, or an event handler)
                break
            busy = [other for other in self.running if self.chains[other] & self.chains[run.job]]
            if busy:
                continue
            del self.pending[run.job]
            run.started, run.status = now, "running"
            try:
                run.handle = self.launcher(run.job, run.log)
            except OSError as e:
                run.finished, run.status = now, "failed"
                self._record(run)
                self.on_event(f"{run.job}: could not start: {e}")
                continue
            self.running[run.job] = run
            late = f", {(now - run.scheduled).total_seconds():.0f} s after its time" if now > run.scheduled else ""
            self.on_event(f"{run.job}: started (tick {run.scheduled:%H:%M}{late}); log {run.log}")
        for run in self.pending.values():
            blocking = sorted(o for o in self.running if self.chains[o] & self.chains[run.job])
            if blocking and not run.announced:
                self.on_event(f"{run.job}: due, waits for {', '.join(blocking)} (overlapping jobs)")
                run.announced = True

    def tick(self, now: datetime, *, schedule: bool = True) -> None:
        """Reap finished runs, queue the jobs due at ``now`` (unless ``schedule`` is false), start what can start."""
        self._reap(now)
        if schedule:
            self._queue_due(now)
        if not self.stopping:
            self._launch_pending(now)

    # -- the loop --

    def serve(self, *, once: bool = False, until: datetime | None = None) -> list[Run]:
        """Serve until :meth:`stop` — or, with ``once``, until the first due jobs have run; or until ``until``
        (no tick after it; runs in flight are waited for). Returns every run recorded."""
        start = self.clock.now()
        self.next_due = {n: self._next_time(n, start) for n in self.names}
        self.on_event("serving " + ", ".join(f"{n} ({self.spec.jobs[n].schedule}; next {self.next_due[n]:%H:%M})"
                                             for n in self.names))
        scheduling = True
        while not self.stopping:
            now = self.clock.now()
            if until is not None and now >= until:
                scheduling = False
            self.tick(now, schedule=scheduling)
            if once and (self.pending or self.running):
                scheduling = False
            if not scheduling and not self.pending and not self.running:
                break
            if self.pending or self.running:
                wait = self.poll_seconds
            else:
                # Capped, so a changed system clock (or a DST jump) is noticed within a minute.
                wait = min(60.0, *((t - now).total_seconds() for t in self.next_due.values()))
                if until is not None:
                    wait = min(wait, (until - now).total_seconds())
            self.clock.wait(max(wait, 0.0), self._stop)
        if self.stopping:
            self._shutdown()
        return self.history

    def _shutdown(self) -> None:
        for run in self.pending.values():
            self.on_event(f"{run.job}: not started, the scheduler stops")
        self.pending.clear()
        if not self.running:
            self.on_event("stopped")
            return
        self.on_event(f"stopping: SIGTERM to {', '.join(sorted(self.running))}")
        for run in self.running.values():
            run.status = "stopped"
            assert run.handle is not None
            run.handle.terminate()
        deadline = self.clock.now() + timedelta(seconds=self.grace_seconds)
        never = threading.Event()  # the stop event is set: waiting on it would not wait
        while self.running:
            now = self.clock.now()
            self._reap(now)
            if not self.running:
                break
            if now >= deadline:
                self.on_event(f"killing {', '.join(sorted(self.running))} after {self.grace_seconds:.0f} s")
                for run in self.running.values():
                    assert run.handle is not None
                    run.handle.kill()
                deadline = now + timedelta(days=365)  # killed: wait for the exit codes
            self.clock.wait(min(0.2, self.poll_seconds), never)
        self.on_event("stopped")
