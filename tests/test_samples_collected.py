"""Without ``../shared`` the suite collects exactly the same test cases: a missing sample is a skip that names it,
never a test that silently disappears from the count (issue #15, item 11).

The check collects the modules that read the samples twice — here, and from a copy of ``tests/`` placed where no
``../shared`` exists beside it (every other top-level entry of the repository is linked, so the code under test is
this checkout's) — and compares the node ids.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
_READS_SAMPLES = re.compile(r"samples_support|samples_dir|kraft-metadata-samples")


def _sample_modules() -> list[str]:
    return sorted(str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "tests").rglob("test_*.py")
                  if p.name != Path(__file__).name and _READS_SAMPLES.search(p.read_text(encoding="utf-8")))


def _collected(root: Path, modules: list[str]) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           *modules], cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return sorted(line for line in done.stdout.splitlines() if "::" in line)


def test_no_case_vanishes_without_the_samples(tmp_path: Path) -> None:
    modules = _sample_modules()
    assert len(modules) >= 5, modules  # the pattern still finds the modules that read the samples
    repo = tmp_path / "repo"
    repo.mkdir()
    for entry in REPO_ROOT.iterdir():
        if entry.name not in ("tests", ".git") and not entry.name.startswith("."):
            (repo / entry.name).symlink_to(entry)
    shutil.copytree(REPO_ROOT / "tests", repo / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    assert not (tmp_path / "shared").exists()
    with_samples = _collected(REPO_ROOT, modules)
    without = _collected(repo, modules)
    assert with_samples, "nothing collected"
    assert without == with_samples
