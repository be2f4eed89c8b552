#!/usr/bin/env bash
# The test command (README, second line; .ci/run calls it). Lint, types, layering, then the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q --disable-pip-version-check -e '.[dev]'
echo "== ruff";         python -m ruff check jbod_model pipelines tests benchmarks
echo "== mypy";         python -m mypy
echo "== import-linter (jbod_model must not import Spark/Delta/GX/pipelines)"; lint-imports
echo "== pytest";       python -m pytest "$@"
