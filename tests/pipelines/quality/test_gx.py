"""``pipelines.quality.gx``: great-expectations is loaded when the runner first validates, not when it is made.

``jbod check`` makes its runner before it starts the log suite's frame in a second process; loading GX there took
3–4 s, which that process (the check's longest part) waited for. A fresh interpreter shows what is loaded when:
this one has GX loaded already by the other tests."""

from __future__ import annotations

import gc
import subprocess
import sys
import weakref
from pathlib import Path
from typing import Any

import pytest
from test_quality_support import DEMO_CLUSTER, demo_lakehouse

from jbod_model.errors import InputError
from pipelines.quality.frames import Frame
from pipelines.quality.gx import GxRunner
from pipelines.quality.inputs import TableSet
from pipelines.quality.runner import check_cluster

_SCRIPT = """
import sys
from pathlib import Path

from pipelines.quality.gx import GxRunner
from pipelines.quality.inputs import TableSet
from pipelines.quality.runner import check_cluster

cluster, tables, project, docs = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
runner = GxRunner(project_dir=project, docs_dir=docs)
print("made:", "great_expectations" in sys.modules, project.exists())
results = check_cluster(TableSet(cluster, tables), runner, suites=("structural",))
print("validated:", "great_expectations" in sys.modules, project.exists(), len(results),
      sorted({r.status for r in results}))
print("docs:", runner.build_docs().is_file(),
      GxRunner(project_dir=project / "alone", docs_dir=docs / "alone").build_docs().is_file())
"""


def test_great_expectations_loads_at_the_first_validation(tmp_path: Path) -> None:
    tables = demo_lakehouse(tmp_path / "tables")
    done = subprocess.run([sys.executable, "-c", _SCRIPT, DEMO_CLUSTER, str(tables), str(tmp_path / "gx"),
                           str(tmp_path / "docs")], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    made, validated, docs = done.stdout.splitlines()
    assert made == "made: False False"  # neither GX loaded nor its project written by making the runner
    assert validated.startswith("validated: True True ") and validated.endswith("['passed']"), validated
    assert docs == "docs: True True"  # and a runner that never validated builds its (empty) docs too


def test_an_unknown_engine_is_refused_when_the_runner_is_made() -> None:
    with pytest.raises(InputError, match="--engine must be one of pandas, spark"):
        GxRunner("duckdb")


class _Watching(GxRunner):
    """A runner that keeps a weak reference to every frame it hands great-expectations."""

    def __init__(self) -> None:
        super().__init__()
        self.handed: list[weakref.ref[Any]] = []

    def _dataframe(self, frame: Frame) -> Any:
        data = super()._dataframe(frame)
        self.handed.append(weakref.ref(data))
        return data


def test_great_expectations_keeps_no_frame_it_validated(tmp_path: Path) -> None:
    # GX keeps each asset's last batch in its execution engine: every frame of a check stayed alive to its end
    # (0.5 GB at 200 k partitions). Once validated, a frame is the check's to let go.
    runner = _Watching()
    results = check_cluster(TableSet(DEMO_CLUSTER, demo_lakehouse(tmp_path / "tables")), runner,
                            suites=("structural", "semantic"))
    gc.collect()
    assert results and len(runner.handed) > 2
    assert [r for r in runner.handed if r() is not None] == []
