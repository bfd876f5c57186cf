#!/usr/bin/env bash
# mypy over the installed layout: the repository's workflows/, activities/ and
# checkpoint/ folders are the durable_agents.* subpackages (setuptools
# package-dir), which a static checker cannot see through the editable
# install's import hook, so it reads a tree of symlinks shaped like the wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
tree=.typecheck
rm -rf "$tree"
mkdir -p "$tree/durable_agents"
for entry in durable_agents/*; do
  ln -s "../../$entry" "$tree/durable_agents/$(basename "$entry")"
done
for folder in workflows activities checkpoint; do
  ln -s "../../$folder" "$tree/durable_agents/$folder"
done
MYPYPATH="$tree" exec "${PYTHON:-.venv/bin/python}" -m mypy --config-file pyproject.toml -p durable_agents "$@"
