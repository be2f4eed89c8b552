"""Configuration resolution: CLI > environment > profile > defaults, validated with clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from jbod_model.errors import InputError
from pipelines.config.profiles import CONF_DIR, DELTA_DEFAULT_RETENTION_HOURS, DeltaWriter, Trigger, resolve_config


@pytest.mark.parametrize("profile", sorted(p.stem for p in CONF_DIR.glob("*.yaml")))
def test_every_bundled_profile_is_valid(profile: str) -> None:
    cfg = resolve_config(profile, env={})
    assert cfg.profile == profile
    assert cfg.spark.conf["spark.sql.streaming.stateStore.providerClass"].endswith("RocksDBStateStoreProvider")


def test_defaults_to_the_local_profile_with_deltalake() -> None:
    cfg = resolve_config(env={})
    assert cfg.profile == "local" and cfg.delta_writer is DeltaWriter.DELTALAKE
    assert cfg.trigger is Trigger.AVAILABLE_NOW and cfg.checkpoint_dir == Path("lakehouse/_checkpoints")


def test_precedence_cli_over_env_over_profile() -> None:
    env = {"JBOD_PROFILE": "standalone", "JBOD_TABLES": "/env/tables", "JBOD_SPARK_MASTER": "spark://env:7077"}
    cfg = resolve_config(env=env)
    assert cfg.profile == "standalone" and cfg.tables == Path("/env/tables")
    assert cfg.spark.master == "spark://env:7077"
    assert cfg.spark.conf["spark.sql.shuffle.partitions"] == "4"  # untouched profile keys survive
    cfg = resolve_config(cli={"tables": "/cli/tables", "spark.master": None}, env=env)
    assert cfg.tables == Path("/cli/tables") and cfg.spark.master == "spark://env:7077"
    assert resolve_config("local", env=env).profile == "local"  # an explicit profile beats JBOD_PROFILE


def test_a_profile_can_be_any_yaml_path(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("tables: /data/t\nmax_entries_per_batch: 100\n")
    cfg = resolve_config(path, env={})
    assert cfg.profile == "mine" and cfg.max_entries_per_batch == 100


@pytest.mark.parametrize(("text", "message"), [
    ("tabels: x\n", "tabels"),
    ("delta_writer: parquet\n", "delta_writer"),
    ("max_entries_per_batch: 0\n", "max_entries_per_batch"),
    ("read_policy: ignore\n", "read_policy"),
    ("quality:\n  fail_on: sometimes\n", "quality.fail_on"),
    ("- a\n- b\n", "mapping"),
    ("tables: [unclosed\n", "not valid YAML"),
])
def test_invalid_profiles_name_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        resolve_config(path, env={})


def test_unknown_profile_lists_the_known_ones() -> None:
    with pytest.raises(InputError, match="local"):
        resolve_config("prod", env={})


def test_maintenance_settings_resolve_with_the_same_precedence(tmp_path: Path) -> None:
    for profile in ("local", "standalone", "cluster"):
        assert resolve_config(profile, env={}).maintenance.retention_hours == DELTA_DEFAULT_RETENTION_HOURS
    path = tmp_path / "m.yaml"
    path.write_text("maintenance:\n  retention_hours: 240\n  optimize: false\n  target_file_size: 33554432\n")
    cfg = resolve_config(path, env={})
    assert (cfg.maintenance.retention_hours, cfg.maintenance.optimize) == (240, False)
    assert cfg.maintenance.target_file_size == 32 * 1024 * 1024
    env = {"JBOD_MAINTENANCE_RETENTION_HOURS": "336", "JBOD_MAINTENANCE_OPTIMIZE": "true"}
    cfg = resolve_config(path, env=env)
    assert (cfg.maintenance.retention_hours, cfg.maintenance.optimize) == (336, True)
    cfg = resolve_config(path, cli={"maintenance.retention_hours": 500, "maintenance.optimize": None}, env=env)
    assert (cfg.maintenance.retention_hours, cfg.maintenance.optimize) == (500, True)
    path.write_text("maintenance:\n  target_file_size: 10\n")
    with pytest.raises(InputError, match=r"maintenance\.target_file_size"):
        resolve_config(path, env={})


def test_read_policy_resolves_with_the_same_precedence(tmp_path: Path) -> None:
    for profile in ("local", "standalone", "cluster"):
        assert resolve_config(profile, env={}).read_policy == "fail"
    path = tmp_path / "p.yaml"
    path.write_text("read_policy: skip\n")
    assert resolve_config(path, env={}).read_policy == "skip"
    assert resolve_config(path, env={"JBOD_READ_POLICY": "fail"}).read_policy == "fail"
    assert resolve_config("local", env={"JBOD_READ_POLICY": "skip"}).read_policy == "skip"
    assert resolve_config(path, cli={"read_policy": "fail"}, env={"JBOD_READ_POLICY": "skip"}).read_policy == "fail"
    assert resolve_config(path, cli={"read_policy": None}, env={}).read_policy == "skip"
