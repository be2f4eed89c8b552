"""Configuration of the jobs: profiles in ``conf/``, resolved by one function with one documented precedence.

Precedence, highest first: **CLI options > environment (``JBOD_*``) > the profile file > defaults**. A profile is a
YAML file (``conf/local.yaml``, ``conf/standalone.yaml``, ``conf/cluster.yaml``, or any path); it is validated by the
pydantic models below, so a typo in a key or a wrong type is an error naming the key, not a silent default.

The domain model never reads configuration: callers pass what they resolved here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from jbod_model.errors import InputError

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
DEFAULT_PROFILE = "local"
ENV_PREFIX = "JBOD_"


class DeltaWriter(StrEnum):
    """How tables are written: ``deltalake`` (delta-rs, the embedded default, no JVM jars) or ``delta-spark``
    (clusters that have the Delta jars on the classpath)."""

    DELTALAKE = "deltalake"
    DELTA_SPARK = "delta-spark"


class Trigger(StrEnum):
    """``available_now`` processes what is there and stops (scheduled jobs); ``continuous`` keeps following new
    files (``--follow``)."""

    AVAILABLE_NOW = "available_now"
    CONTINUOUS = "continuous"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SparkSettings(_Strict):
    """The Spark session: master URL and extra ``spark.*`` settings."""

    master: str = "local[2]"
    app_name: str = "kraft-jbod"
    conf: dict[str, str] = Field(default_factory=dict)


#: A data-quality suite of ``jbod check`` (``pipelines.quality``; docs/data-quality.md).
Suite = Literal["structural", "semantic", "history", "log", "external"]
SUITE_NAMES: tuple[str, ...] = get_args(Suite)


class QualitySettings(_Strict):
    """Data-quality checks (``jbod check``): which suites run, when a failure fails the run (``fail_on``: exit 1
    when an expectation of that severity or worse fails; ``never`` only reports), thresholds, the engine GX
    validates on and how many offending rows a result keeps as its sample."""

    suites: tuple[Suite, ...] = ("structural", "semantic", "history", "log", "external")
    fail_on: str = Field(default="error", pattern="^(error|warning|never)$")
    #: I12 (placeholders resolve) and I9's carried-over registrations: the longest wait, in offsets and in ms.
    pending_placement_max_offsets: int = Field(default=10_000, ge=1)
    pending_placement_max_ms: int = Field(default=600_000, ge=1)
    engine: str = Field(default="pandas", pattern="^(pandas|spark)$")
    sample_rows: int = Field(default=20, ge=1, le=1000)
    #: Processes a large cluster's frames are built in (None: one per core; 1 keeps a small driver's memory to one
    #: process — two hold ≈ 1.4× one's peak, docs/data-quality.md).
    workers: int | None = Field(default=None, ge=1)


#: Delta's default ``delta.deletedFileRetentionDuration`` (7 days): vacuum keeps removed files at least this long.
DELTA_DEFAULT_RETENTION_HOURS = 168


class MaintenanceSettings(_Strict):
    """Table maintenance (``jbod maintain``, docs/jobs.md): compact small files, vacuum removed files older than
    ``retention_hours``, checkpoint the Delta log and drop its expired entries. A retention below
    :data:`DELTA_DEFAULT_RETENTION_HOURS` is refused at run time unless forced (a reader of an older
    version may still need the files), so it is not rejected here: ``--force`` must be able to use it."""

    retention_hours: int = Field(default=DELTA_DEFAULT_RETENTION_HOURS, ge=0)
    optimize: bool = True
    #: Compaction's target file size in bytes (delta-rs's default, 100 MB).
    target_file_size: int = Field(default=104_857_600, ge=1_048_576)


class JobConfig(_Strict):
    """Everything a job needs, after resolution."""

    profile: str = DEFAULT_PROFILE
    tables: Path = Path("lakehouse")
    checkpoints: Path | None = None
    delta_writer: DeltaWriter = DeltaWriter.DELTALAKE
    trigger: Trigger = Trigger.AVAILABLE_NOW
    max_entries_per_batch: int | None = Field(default=None, ge=1)
    #: Replay buckets per cluster (``jbod_model.buckets``; default ``pipelines.streaming.job.DEFAULT_BUCKETS``): one
    #: cluster's replay spread over that many state keys, so it uses several cores. Fixed into the checkpoint.
    buckets: int | None = Field(default=None, ge=1)
    cluster_id: str | None = None
    #: On undecodable input (a batch whose CRC fails, a torn segment tail): ``fail`` stops the job naming the file
    #: and offsets; ``skip`` skips those offsets, keeps every good record and writes a ``log_gaps`` row per range.
    read_policy: Literal["fail", "skip"] = "fail"
    spark: SparkSettings = Field(default_factory=SparkSettings)
    quality: QualitySettings = Field(default_factory=QualitySettings)
    maintenance: MaintenanceSettings = Field(default_factory=MaintenanceSettings)

    @property
    def checkpoint_dir(self) -> Path:
        """Where streaming checkpoints live (default: ``<tables>/_checkpoints``)."""
        return self.checkpoints if self.checkpoints is not None else self.tables / "_checkpoints"


#: Environment variables and the config keys they set (dotted for nested keys).
ENV_KEYS: Mapping[str, str] = {
    "JBOD_TABLES": "tables",
    "JBOD_CHECKPOINTS": "checkpoints",
    "JBOD_DELTA_WRITER": "delta_writer",
    "JBOD_TRIGGER": "trigger",
    "JBOD_MAX_ENTRIES_PER_BATCH": "max_entries_per_batch",
    "JBOD_BUCKETS": "buckets",
    "JBOD_CLUSTER_ID": "cluster_id",
    "JBOD_READ_POLICY": "read_policy",
    "JBOD_SPARK_MASTER": "spark.master",
    "JBOD_MAINTENANCE_RETENTION_HOURS": "maintenance.retention_hours",
    "JBOD_MAINTENANCE_OPTIMIZE": "maintenance.optimize",
}


def profile_path(profile: str | Path) -> Path:
    """A profile name (``local``) is a file in ``conf/``; anything with a suffix or a slash is a path."""
    p = Path(profile)
    if p.suffix in (".yaml", ".yml") or len(p.parts) > 1:
        return p
    return CONF_DIR / f"{profile}.yaml"


def _set_dotted(target: dict[str, Any], dotted: str, value: Any) -> None:
    node = target
    *parents, leaf = dotted.split(".")
    for key in parents:
        child = node.get(key)
        if not isinstance(child, dict):
            child = {}
            node[key] = child
        node = child
    node[leaf] = value


def _merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def load_profile(profile: str | Path) -> dict[str, Any]:
    """The raw mapping of a profile file (validated later, together with the other layers)."""
    path = profile_path(profile)
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in CONF_DIR.glob("*.yaml")))
        raise InputError(f"Unknown profile {profile!s}: {path} does not exist (profiles in conf/: {known})")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise InputError(f"{path}: not valid YAML: {e}") from e
    if not isinstance(data, dict):
        raise InputError(f"{path}: a profile is a mapping of settings, not {type(data).__name__}")
    data.setdefault("profile", path.stem)
    return data


def resolve_config(profile: str | Path | None = None, cli: Mapping[str, Any] | None = None,
                   env: Mapping[str, str] | None = None) -> JobConfig:
    """Resolve the configuration: CLI > environment > profile > defaults. ``cli`` uses dotted keys for nested
    settings (``{"spark.master": "spark://…"}``); None values mean "not given". The profile itself may be chosen
    by the CLI (``profile``), else by ``JBOD_PROFILE``, else ``local``."""
    environ = os.environ if env is None else env
    chosen = profile if profile is not None else environ.get(f"{ENV_PREFIX}PROFILE", DEFAULT_PROFILE)
    layered = load_profile(chosen)
    from_env: dict[str, Any] = {}
    for var, key in ENV_KEYS.items():
        if environ.get(var):
            _set_dotted(from_env, key, environ[var])
    layered = _merge(layered, from_env)
    from_cli: dict[str, Any] = {}
    for key, value in (cli or {}).items():
        if value is not None:
            _set_dotted(from_cli, key, value)
    layered = _merge(layered, from_cli)
    try:
        return JobConfig.model_validate(layered)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors())
        raise InputError(f"Invalid configuration (profile {chosen!s}): {problems}") from None


def available_cores() -> int:
    """The cores this process may run on: what the commands that spread their work over processes use by default
    (the fleet's reports, the check's frames)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
