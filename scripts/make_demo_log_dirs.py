"""Write the bundled demo's disks: ``pipelines/examples/demo-log-dirs/broker-<id>/mnt/d<n>/meta.properties``, one per
log directory that a BROKER_REGISTRATION_REQUEST of ``demo-disk-failure.jsonl`` registers (``d1`` is its first
logDir, ``d2`` the second), as ``kafka-storage format`` writes them. Each ``broker-<id>`` folder stands for a copy of
that broker's filesystem root, so ``jbod dirs --as-root`` names the disks ``/mnt/d1`` and ``/mnt/d2``; the default
``jbod run`` loads them into ``dir_inventory``.

Run from the repository root after changing the demo: ``python scripts/make_demo_log_dirs.py``.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

from jbod_model.meta_properties import MetaProperties, MetaPropertiesVersion, to_text
from jbod_model.uuid import Uuid

EXAMPLES = Path(__file__).resolve().parents[1] / "pipelines" / "examples"
DEMO = EXAMPLES / "demo-disk-failure.jsonl"
OUT = EXAMPLES / "demo-log-dirs"
#: A fixed date line, so that the files do not change when regenerated.
FORMATTED_AT = datetime(2025, 1, 1, tzinfo=UTC)


def main() -> None:
    if OUT.exists():
        shutil.rmtree(OUT)
    for line in DEMO.read_text(encoding="utf-8").splitlines():
        obj = json.loads(line)
        if obj.get("type") != "BROKER_REGISTRATION_REQUEST":
            continue
        data = obj["data"]
        for n, directory in enumerate(data["logDirs"], start=1):
            meta = MetaProperties(version=MetaPropertiesVersion.V1, cluster_id=data["clusterId"],
                                  node_id=data["brokerId"], directory_id=Uuid.from_string(directory))
            path = OUT / f"broker-{data['brokerId']}" / "mnt" / f"d{n}" / "meta.properties"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(to_text(meta, date=FORMATTED_AT), encoding="utf-8")
            print(path.relative_to(EXAMPLES.parents[1]))


if __name__ == "__main__":
    main()
