"""What the commands say reads as English: counts agree with their nouns, a history that starts at the beginning
of the log says so (not ``offset -1``), whatif's record count says what the records are (issue #15 item 8; the
``--policy skip`` summary: test_cli_model_commands.test_skip_policy_keeps_the_good_records)."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from pipelines.cli import app
from pipelines.report.wording import counted

runner = CliRunner(env={"COLUMNS": "200"})
DEMO = Path(__file__).resolve().parents[3] / "pipelines" / "examples" / "demo-disk-failure.jsonl"
#: A count of 1 with a plural noun: ``1 open incidents``, ``1 partitions lose``.
ONE_PLURAL = re.compile(r"\b1 (?:open incidents|partitions|replicas|brokers|disks|pending placements|records)\b")


def test_counted() -> None:
    assert counted(1, "open incident") == "1 open incident"
    assert counted(0, "open incident") == "0 open incidents"
    assert counted(2, "partition loses its leader", "partitions lose their leader") == "2 partitions lose their leader"


def test_report_says_where_its_history_starts_and_counts_agree() -> None:
    result = runner.invoke(app, ["report", str(DEMO)])
    assert result.exit_code == 0, result.output
    assert "history from the start of the log" in result.stdout and "offset -1" not in result.stdout
    assert "1 open incident" in result.stdout and not ONE_PLURAL.search(result.stdout), result.stdout


def test_whatif_explains_its_records_and_counts_agree() -> None:
    result = runner.invoke(app, ["whatif", str(DEMO), "--fail-dir", "JbzRyYgxSHyV9F8hM29Rbg"])
    assert result.exit_code == 0, result.output
    assert "1 partition loses its leader" in result.stdout and not ONE_PLURAL.search(result.stdout)
    assert "the controller would write 3 metadata records" in result.stdout


#: What belongs in the docs and the tests, not in a command's output: test paths, issue ids, the spec's tooling.
INTERNALS = re.compile(r"tests/|TLA\+|\breproduces\b|\bS\d\b")


def test_user_output_names_no_internals(tmp_path: Path) -> None:
    from pipelines.quality import SKIPS

    listed = runner.invoke(app, ["simulate", "--list"])
    ran = runner.invoke(app, ["simulate", "demo", "--out", str(tmp_path / "demo"), "--seed", "2"])
    assert listed.exit_code == 0 and ran.exit_code == 0, ran.output
    for text in (ran.stdout, *(s.reason for s in SKIPS)):
        assert not INTERNALS.search(text), INTERNALS.search(text)
    # The scenario list: no "reproduces S3, S4" column (the scenarios' own descriptions belong to the simulator).
    assert not re.search(r"\breproduces\b|\bS\d, S\d\b", listed.stdout)
