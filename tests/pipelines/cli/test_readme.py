"""The README's console blocks (issue #15 items 5 and 10): what they write lands in folders git ignores, so
following the README leaves no untracked file in the repository (``--html report.html`` used to)."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def console_commands(readme: Path = REPO / "README.md") -> list[list[str]]:
    """Every ``$ `` command of the README's ```console blocks, as argv (comments dropped)."""
    blocks = re.findall(r"```console\n(.*?)```", readme.read_text(encoding="utf-8"), re.S)
    return [shlex.split(line[2:], comments=True) for block in blocks for line in block.splitlines()
            if line.startswith("$ ")]


def test_readme_outputs_go_to_ignored_folders() -> None:
    outputs = [argv[i + 1] for argv in console_commands() for i, a in enumerate(argv[:-1])
               if a in ("--html", "--out", "--tables")]
    assert any(o.endswith((".html", "/")) for o in outputs)
    # A folder is checked through a file in it (a pattern like /lakehouse/ matches directories only).
    for out in (o if o.endswith(".html") else o.rstrip("/") + "/file" for o in outputs):
        ignored = subprocess.run(["git", "check-ignore", "-q", "--no-index", out], cwd=REPO, check=False)
        assert ignored.returncode == 0, f"{out}: a README command writes it, and git does not ignore it"
