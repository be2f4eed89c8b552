"""``jbod jobs serve``: cron ticks, failures, no overlapping runs, clean stops — driven by a fake clock and a fake
launcher (hours of ticks in milliseconds), then with real subprocesses and a real SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from jbod_model.errors import InputError
from pipelines.cli import app
from pipelines.scheduling.jobs import JobsFile, load_jobs
from pipelines.scheduling.scheduler import Run, Scheduler, SubprocessLauncher

REPO = Path(__file__).resolve().parents[3]
DEMO = REPO / "pipelines" / "examples" / "demo-disk-failure.jsonl"
START = datetime(2025, 3, 3, 11, 59, 30, tzinfo=UTC)


def at(hh: int, mm: int, ss: int = 0) -> datetime:
    return START.replace(hour=hh, minute=mm, second=ss)


class FakeClock:
    def __init__(self, now: datetime = START) -> None:
        self.current = now

    def now(self) -> datetime:
        return self.current

    def wait(self, seconds: float, wake: threading.Event) -> None:
        if not wake.is_set():
            self.current += timedelta(seconds=seconds)


class FakeRun:
    """A job that ends ``seconds`` after it starts with ``code`` (or when terminated, unless it ignores that)."""

    def __init__(self, clock: FakeClock, seconds: float, code: int, ignores_sigterm: bool) -> None:
        self.clock, self.code, self.ignores_sigterm = clock, code, ignores_sigterm
        self.ends = clock.now() + timedelta(seconds=seconds)
        self.signals: list[str] = []

    def poll(self) -> int | None:
        return self.code if self.clock.now() >= self.ends else None

    def terminate(self) -> None:
        self.signals.append("TERM")
        if not self.ignores_sigterm:
            self.ends, self.code = self.clock.now(), -15

    def kill(self) -> None:
        self.signals.append("KILL")
        self.ends, self.code = self.clock.now(), -9


class FakeLauncher:
    """Starts fake runs and checks the scheduler's promise: no two running runs whose chains share a job."""

    def __init__(self, clock: FakeClock, spec: JobsFile, seconds: dict[str, float],
                 codes: dict[str, int] | None = None, ignores_sigterm: bool = False) -> None:
        self.clock, self.spec, self.seconds, self.codes = clock, spec, seconds, codes or {}
        self.ignores_sigterm = ignores_sigterm
        self.started: list[tuple[str, datetime]] = []
        self.runs: dict[str, list[FakeRun]] = {}

    def chain(self, name: str) -> set[str]:
        from pipelines.scheduling.jobs import run_order

        return set(run_order(self.spec, name))

    def __call__(self, name: str, log: Path) -> FakeRun:
        for other, runs in self.runs.items():
            if runs[-1].poll() is None:
                assert not (self.chain(other) & self.chain(name)), f"{name} started while {other} runs"
        run = FakeRun(self.clock, self.seconds.get(name, 5), self.codes.get(name, 0), self.ignores_sigterm)
        self.started.append((name, self.clock.now()))
        self.runs.setdefault(name, []).append(run)
        return run

    def starts(self, name: str) -> list[datetime]:
        return [t for n, t in self.started if n == name]


def spec_of(tmp_path: Path, body: str) -> JobsFile:
    path = tmp_path / "jobs.yaml"
    path.write_text(body)
    return load_jobs(path)


def serve(tmp_path: Path, body: str, seconds: dict[str, float], *, until: datetime | None = None,
          codes: dict[str, int] | None = None, once: bool = False,
          on_event: Callable[[Scheduler, str], None] | None = None,
          ignores_sigterm: bool = False) -> tuple[FakeLauncher, list[Run], list[str]]:
    clock = FakeClock()
    spec = spec_of(tmp_path, body)
    launcher = FakeLauncher(clock, spec, seconds, codes, ignores_sigterm)
    events: list[str] = []

    def record(message: str) -> None:
        events.append(message)
        if on_event is not None:
            on_event(scheduler, message)

    scheduler = Scheduler(spec, launcher, log_dir=tmp_path / "logs", clock=clock, on_event=record,
                          grace_seconds=30)
    runs = scheduler.serve(until=until, once=once)
    return launcher, runs, events


TWO = """
version: 1
jobs:
  every-minute: {command: image, schedule: "* * * * *"}
  every-other: {command: image, schedule: "*/2 * * * *"}
  by-hand: {command: image}
"""


def test_jobs_run_at_their_cron_ticks(tmp_path: Path) -> None:
    launcher, runs, _ = serve(tmp_path, TWO, {"every-minute": 10, "every-other": 70}, until=at(12, 6))
    assert launcher.starts("every-minute") == [at(12, m) for m in range(6)]
    assert launcher.starts("every-other") == [at(12, 0), at(12, 2), at(12, 4)]
    assert "by-hand" not in launcher.runs  # no schedule: run by hand only
    assert {r.status for r in runs} == {"ok"} and len(runs) == 9
    lines = [json.loads(x) for x in (tmp_path / "logs" / "runs.jsonl").read_text().splitlines()]
    assert len(lines) == 9 and lines[0]["job"] == "every-minute" and lines[0]["seconds"] == 10.0
    assert lines[0]["log"].endswith("every-minute/20250303T120000.log")


def test_a_failing_job_is_recorded_and_runs_again_at_its_next_tick(tmp_path: Path) -> None:
    launcher, runs, events = serve(tmp_path, TWO, {}, codes={"every-other": 3}, until=at(12, 4))
    failed = [r for r in runs if r.job == "every-other"]
    assert [r.status for r in failed] == ["failed", "failed"] and {r.exit_code for r in failed} == {3}
    assert len(launcher.starts("every-minute")) == 4  # the other job is not affected
    assert any("every-other: failed (exit 3)" in e for e in events)


def test_a_long_job_never_overlaps_itself_and_missed_ticks_coalesce(tmp_path: Path) -> None:
    body = "version: 1\njobs:\n  slow: {command: image, schedule: '* * * * *'}\n"
    launcher, runs, _ = serve(tmp_path, body, {"slow": 150}, until=at(12, 6))
    # 12:00 runs to 12:02:30; the 12:01 tick waits for it, the 12:02 tick is dropped (one run waits at most) …
    assert launcher.starts("slow") == [at(12, 0), at(12, 2, 30), at(12, 5)]
    done = [r for r in runs if r.status == "ok"]
    assert [r.scheduled for r in done] == [at(12, 0), at(12, 1), at(12, 3)]
    assert [r.scheduled for r in runs if r.status == "skipped"] == [at(12, 2), at(12, 4), at(12, 5)]
    assert done[-1].finished == at(12, 7, 30)  # the run in flight at the end is waited for


def test_jobs_whose_chains_share_a_job_wait_for_each_other(tmp_path: Path) -> None:
    body = """
version: 1
jobs:
  ingest: {command: image, schedule: "*/5 * * * *"}
  check: {command: image, schedule: "*/5 * * * *", depends_on: [ingest]}
  other: {command: image, schedule: "*/5 * * * *"}
"""
    launcher, _, events = serve(tmp_path, body, {"ingest": 90, "check": 120, "other": 200}, until=at(12, 1))
    # 'check' runs ingest first: it starts when the scheduled ingest is done; 'other' shares nothing and runs at once.
    assert launcher.starts("ingest") == [at(12, 0)]
    assert launcher.starts("check") == [at(12, 1, 30)]
    assert launcher.starts("other") == [at(12, 0)]
    assert "check: due, waits for ingest (overlapping jobs)" in events


def test_once_runs_the_next_due_jobs_and_returns(tmp_path: Path) -> None:
    launcher, runs, _ = serve(tmp_path, TWO, {"every-minute": 30, "every-other": 45}, once=True)
    assert launcher.started == [("every-minute", at(12, 0)), ("every-other", at(12, 0))]
    assert [r.finished for r in runs] == [at(12, 0, 30), at(12, 0, 45)]


@pytest.mark.parametrize(("ignores_sigterm", "signals", "code"), [(False, ["TERM"], -15),
                                                                   (True, ["TERM", "KILL"], -9)])
def test_stop_terminates_running_jobs_then_kills_after_the_grace(tmp_path: Path, ignores_sigterm: bool,
                                                                 signals: list[str], code: int) -> None:
    def stop_when_started(scheduler: Scheduler, message: str) -> None:
        if "started" in message:
            scheduler.stop()

    launcher, runs, events = serve(tmp_path, TWO, {"every-minute": 600, "every-other": 600},
                                   on_event=stop_when_started, ignores_sigterm=ignores_sigterm)
    assert len(launcher.started) == 1  # the second due job is not started once stopping
    [run] = runs
    assert run.status == "stopped" and run.exit_code == code and run.finished is not None
    assert launcher.runs[run.job][0].signals == signals
    assert events[-1] == "stopped"
    if ignores_sigterm:
        assert at(12, 0, 30) <= run.finished < at(12, 0, 31)  # killed when the 30 s grace ran out


def test_serving_unknown_or_unscheduled_jobs_is_an_error(tmp_path: Path) -> None:
    spec = spec_of(tmp_path, TWO)
    with pytest.raises(InputError, match="no schedule"):
        Scheduler(spec, FakeLauncher(FakeClock(), spec, {}), log_dir=tmp_path, jobs=["by-hand"])
    with pytest.raises(InputError, match="Unknown job"):
        Scheduler(spec, FakeLauncher(FakeClock(), spec, {}), log_dir=tmp_path, jobs=["nope"])


# --- real subprocesses -----------------------------------------------------------------------------------------


class SoonClock:
    """Real time, shifted so that the next minute starts ``lead`` seconds from now: a real tick without waiting."""

    def __init__(self, lead: float = 0.5) -> None:
        now = datetime.now(UTC)
        next_minute = (now + timedelta(minutes=1)).replace(second=0, microsecond=0)
        self.offset = next_minute - now - timedelta(seconds=lead)

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def wait(self, seconds: float, wake: threading.Event) -> None:
        wake.wait(max(0.0, seconds))


def test_real_runs_go_to_subprocesses_with_their_output_in_log_files(tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text(f"""
version: 1
jobs:
  demo: {{command: image, args: ["{DEMO}", "--json"], schedule: "* * * * *"}}
  broken: {{command: image, args: ["{tmp_path / 'missing.jsonl'}"], schedule: "* * * * *"}}
""")
    scheduler = Scheduler(load_jobs(path), SubprocessLauncher(path, workdir=tmp_path), log_dir=tmp_path / "logs",
                          clock=SoonClock(), poll_seconds=0.1)
    runs = {r.job: r for r in scheduler.serve(once=True)}
    assert runs["demo"].status == "ok" and runs["broken"].status == "failed" and runs["broken"].exit_code == 2
    demo_log = runs["demo"].log.read_text()
    assert "job demo" in demo_log and '"featureLevel":21' in demo_log
    assert "missing.jsonl" in runs["broken"].log.read_text()


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its reaper does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


GRANDPARENT = """
import subprocess, sys, time
# Like `jbod run` starting a JVM: the job's own child must stop with it.
subprocess.Popen([sys.executable, "-c", "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); "
                  "time.sleep(120)", sys.argv[1]])
time.sleep(120)
"""


def test_stop_ends_the_process_group_of_a_real_run(tmp_path: Path) -> None:
    marker = tmp_path / "grandchild.pid"
    path = tmp_path / "jobs.yaml"
    path.write_text("version: 1\njobs:\n  long: {command: image, schedule: '* * * * *'}\n")

    def stop_once_running(message: str) -> None:
        if "started" in message:
            deadline = time.monotonic() + 20
            while not marker.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.1)  # the pid is written
            scheduler.stop()

    launcher = SubprocessLauncher(path, command=lambda _name: [sys.executable, "-c", GRANDPARENT, str(marker)])
    scheduler = Scheduler(load_jobs(path), launcher, log_dir=tmp_path / "logs", clock=SoonClock(), poll_seconds=0.1,
                          on_event=stop_once_running)
    started = time.monotonic()
    [run] = scheduler.serve()
    assert run.status == "stopped" and run.exit_code == -signal.SIGTERM
    assert time.monotonic() - started < 20
    grandchild = int(marker.read_text())
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)


def test_sigterm_stops_the_serve_command_cleanly(tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text(f"version: 1\njobs:\n  demo: {{command: image, args: ['{DEMO}'], schedule: '0 0 1 1 *'}}\n")
    proc = subprocess.Popen([sys.executable, "-m", "pipelines.cli", "jobs", "serve", "--file", str(path),
                             "--log-dir", str(tmp_path / "logs")], stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "200"}, cwd=REPO)
    try:
        assert proc.stderr is not None
        assert "serving demo (0 0 1 1 *" in proc.stderr.readline()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        assert "stopped" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_serve_cli_rejects_a_job_without_schedule(tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text(TWO)
    result = CliRunner().invoke(app, ["jobs", "serve", "--file", str(path), "--job", "by-hand"])
    assert result.exit_code == 2 and "no schedule" in result.stderr
