#!/usr/bin/env bash
# lint-imports.sh - check the import-linter contracts of pyproject.toml ([tool.importlinter]).
#
#   bash tests/tooling/lint-imports.sh [LINT-IMPORTS ARGS...]
#
# executors/ is installed as mbridge_launch.executors (pyproject's package-dir), which an editable
# install resolves through an import hook that import-linter cannot see. So the package is laid out
# as installed, with symbolic links in a temporary folder, and import-linter reads it from there.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LINT=${LINT_IMPORTS:-$ROOT/.venv/bin/lint-imports}
tree=$(mktemp -d "${TMPDIR:-/tmp}/mbl-lint-imports.XXXXXX")
trap 'rm -rf "$tree"' EXIT
mkdir "$tree/mbridge_launch"
for entry in "$ROOT"/mbridge_launch/*; do
  case $(basename "$entry") in __pycache__) continue ;; esac
  ln -s "$entry" "$tree/mbridge_launch/"
done
ln -s "$ROOT/executors" "$tree/mbridge_launch/executors"
cd "$tree"
PYTHONPATH="$tree" "$LINT" --no-cache "$@" "$ROOT/pyproject.toml"
