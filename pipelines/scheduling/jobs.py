"""Scheduled jobs declared in ``jobs.yaml``: validated, listed, run (with their dependencies) and exported to cron.

Each job names one ``jbod`` command with its arguments, a cron schedule, the conf profile it runs with and the jobs
it depends on. ``jbod jobs run NAME`` is what cron (or an orchestrator, or ``jbod jobs serve``) calls: it runs the
dependencies first, in order, then the job, each in this process with ``JBOD_PROFILE`` set to the job's profile.

Arguments may name environment variables — ``${VAR}``, ``${VAR:-default}`` (the default when VAR is unset or
empty), ``$$`` for a literal ``$`` — so one jobs file serves every machine (docs/jobs.md). The syntax is checked
when the file is loaded; the values are read when the job runs, and a variable that is unset and has no default
stops the job before it starts, naming the job, the argument and the variable.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from croniter import croniter
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from jbod_model.errors import InputError
from pipelines.config.profiles import profile_path

JOBS_FILE = Path(__file__).resolve().parents[2] / "jobs.yaml"


#: ``$$``, ``${NAME}`` or ``${NAME:-default}`` (the default runs to the first ``}``: no nesting), or a ``$`` that
#: starts something else — told apart in :func:`_expand` (a bare ``$NAME`` is refused, not left alone).
_VARIABLE = re.compile(r"\$(?:(?P<dollar>\$)|\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}"
                       r"|(?P<bare>[A-Za-z_{]))")


def _expand(text: str, env: Mapping[str, str] | None) -> tuple[str, list[tuple[str, str | None]]]:
    """``text`` with its variables replaced from ``env`` (None: only check the syntax, replace nothing), and the
    variables it uses with their defaults. Raises ValueError on malformed syntax or an unset variable."""
    used: list[tuple[str, str | None]] = []

    def replace(m: re.Match[str]) -> str:
        if m.group("dollar"):
            return "$"
        if m.group("bare") is not None:
            rest = text[m.start():m.start() + 20]
            if m.group("bare") == "{":
                raise ValueError(f"malformed variable {rest!r}: write ${{NAME}} or ${{NAME:-default}}")
            raise ValueError(f"{rest!r}: write ${{NAME}} (braces are required) or $$ for a literal $")
        name, default = m.group("name"), m.group("default")
        used.append((name, default))
        if env is None:
            return m.group(0)
        value = env.get(name)
        if value is None or (value == "" and default is not None):
            if default is None:
                raise ValueError(f"environment variable {name} is not set and ${{{name}}} has no default "
                                 f"(set it, or write ${{{name}:-default}})")
            return default
        return value

    return _VARIABLE.sub(replace, text), used


def expand_args(spec: JobsFile, name: str, env: Mapping[str, str] | None = None) -> list[str]:
    """The job's arguments with their environment variables replaced (``env`` defaults to ``os.environ``)."""
    environ = os.environ if env is None else env
    out = []
    for i, arg in enumerate(spec.jobs[name].args):
        try:
            out.append(_expand(arg, environ)[0])
        except ValueError as e:
            raise InputError(f"job {name!r}, argument {i + 1} ({arg!r}): {e}") from None
    return out


def variables(spec: JobsFile) -> dict[str, str | None]:
    """Every environment variable the jobs' arguments use, with its default: None when an argument uses it without
    one (it must be set), else the first default seen."""
    out: dict[str, str | None] = {}
    for job in spec.jobs.values():
        for arg in job.args:
            for var, default in _expand(arg, None)[1]:
                if var not in out or default is None:
                    out[var] = default if var not in out else None
    return dict(sorted(out.items()))


class Job(BaseModel):
    """One scheduled job."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    description: str = ""
    command: str
    args: tuple[str, ...] = ()
    schedule: str | None = None
    profile: str | None = None
    depends_on: tuple[str, ...] = ()
    enabled: bool = True

    @field_validator("schedule")
    @classmethod
    def _valid_cron(cls, value: str | None) -> str | None:
        if value is not None and not croniter.is_valid(value):
            raise ValueError(f"not a valid cron expression: {value!r}")
        return value

    @field_validator("args")
    @classmethod
    def _valid_variables(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for arg in value:
            _expand(arg, None)  # the syntax only: the values are read when the job runs
        return value


class JobsFile(BaseModel):
    """The whole ``jobs.yaml``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = Field(1, ge=1, le=1)
    default_profile: str = "local"
    jobs: dict[str, Job]

    def profile_of(self, name: str) -> str:
        return self.jobs[name].profile or self.default_profile


def load_jobs(path: str | Path = JOBS_FILE, commands: Sequence[str] | None = None) -> JobsFile:
    """Load and validate: schema, cron expressions, commands that exist (when ``commands`` is given), profiles that
    exist, dependencies that exist and form no cycle. Every problem is an InputError naming the job."""
    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text())
    except FileNotFoundError:
        raise InputError(f"{p}: no such jobs file") from None
    except yaml.YAMLError as e:
        raise InputError(f"{p}: not valid YAML: {e}") from e
    try:
        spec = JobsFile.model_validate(raw)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}" for err in e.errors())
        raise InputError(f"{p}: {problems}") from None
    for name, job in spec.jobs.items():
        if commands is not None and job.command not in commands:
            raise InputError(f"{p}: job {name!r} runs unknown command {job.command!r} "
                             f"(commands: {', '.join(sorted(commands))})")
        profile = spec.profile_of(name)
        if not profile_path(profile).is_file():
            raise InputError(f"{p}: job {name!r} uses profile {profile!r}, which does not exist")
        for dep in job.depends_on:
            if dep not in spec.jobs:
                raise InputError(f"{p}: job {name!r} depends on unknown job {dep!r}")
    for name in spec.jobs:
        run_order(spec, name)  # raises on a cycle
    return spec


def run_order(spec: JobsFile, name: str) -> list[str]:
    """The job's dependencies (transitively, each once, dependencies first) followed by the job."""
    if name not in spec.jobs:
        raise InputError(f"Unknown job {name!r} (jobs: {', '.join(sorted(spec.jobs))})")
    order: list[str] = []
    visiting: list[str] = []

    def visit(job: str) -> None:
        if job in order:
            return
        if job in visiting:
            cycle = " -> ".join([*visiting[visiting.index(job):], job])
            raise InputError(f"Job dependencies form a cycle: {cycle}")
        visiting.append(job)
        for dep in spec.jobs[job].depends_on:
            visit(dep)
        visiting.pop()
        order.append(job)

    visit(name)
    return order


@contextmanager
def _profile_env(profile: str) -> Iterator[None]:
    previous = os.environ.get("JBOD_PROFILE")
    os.environ["JBOD_PROFILE"] = profile
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("JBOD_PROFILE", None)
        else:
            os.environ["JBOD_PROFILE"] = previous


def run_job(spec: JobsFile, name: str, invoke: Callable[[list[str]], Any],
            on_start: Callable[[str, list[str]], None] | None = None) -> list[str]:
    """Run ``name`` after its dependencies; ``invoke`` runs one command line (the CLI passes its own app). A
    failing step raises and stops the chain. Returns the jobs run, in order.

    Every step's arguments are expanded before the first one runs: a variable missing for the last step must not
    leave the chain half done."""
    steps = []
    for job_name in run_order(spec, name):
        job = spec.jobs[job_name]
        if not job.enabled:
            raise InputError(f"Job {job_name!r} is disabled in the jobs file")
        steps.append((job_name, [job.command, *expand_args(spec, job_name)]))
    ran = []
    for job_name, argv in steps:
        if on_start is not None:
            on_start(job_name, argv)
        with _profile_env(spec.profile_of(job_name)):
            invoke(argv)
        ran.append(job_name)
    return ran


def crontab_lines(spec: JobsFile, *, workdir: Path, jbod: Sequence[str], jobs_file: Path | None = None,
                  log_dir: Path | None = None, env: Mapping[str, str] | None = None) -> list[str]:
    """One crontab line per enabled, scheduled job: ``cd <workdir> && <jbod> jobs run <name>``.

    ``jbod`` is the command line that starts the CLI, by absolute paths: cron's PATH (``/usr/bin:/bin``) does not
    hold a virtualenv's or pyenv's ``jbod`` script (``sh: 1: jbod: not found``).

    cron runs jobs with an almost empty environment, so the variables the arguments use are listed in comments;
    with ``env``, those set there are written as ``NAME=value`` lines, which cron passes to the jobs after them."""
    lines = [f"# kraft-jbod jobs ({len(spec.jobs)} declared); generated by 'jbod jobs crontab'"]
    for var, default in variables(spec).items():
        value = None if env is None else env.get(var)
        if value is not None and "\n" not in value:
            lines.append(f"{var}={value}")
        else:
            lines.append(f"# ${{{var}}}: " + ("must be set (no default)" if default is None
                                               else f"default {default!r} when unset"))
    for name, job in sorted(spec.jobs.items()):
        if not job.enabled or job.schedule is None:
            continue
        cmd = [*jbod, "jobs", "run", name]
        if jobs_file is not None:
            cmd += ["--file", str(jobs_file)]
        line = f"{job.schedule} cd {shlex.quote(str(workdir))} && {shlex.join(cmd)}"
        if log_dir is not None:
            line += f" >> {shlex.quote(str(log_dir / f'{name}.log'))} 2>&1"
        lines.append(line)
    return lines


def describe(spec: JobsFile) -> list[Mapping[str, Any]]:
    """Rows for ``jbod jobs list``."""
    return [{"name": name, "command": shlex.join([job.command, *job.args]), "schedule": job.schedule or "",
             "profile": spec.profile_of(name), "depends_on": list(job.depends_on), "enabled": job.enabled,
             "description": job.description}
            for name, job in sorted(spec.jobs.items())]
