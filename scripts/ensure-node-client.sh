#!/usr/bin/env bash
# Make sure Temporal's Node client (@temporalio/client, pinned below) is installed for
# the outside-client tests (tests/outside_clients/test_node_client.py), in a folder of
# its own: .node-client/ at the repository root (gitignored). Idempotent: does nothing
# when the pinned version is already there. Prints the folder on stdout. Called by
# `make test`.
#
# Without `node` and `npm` on PATH it says so and exits 0 printing no folder (the Node
# test then skips with that reason), unless $CI is set: then it fails.
set -euo pipefail

VERSION="1.24.0"  # checked with `npm view @temporalio/client version`
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${ROOT}/.node-client"

missing=""
command -v node >/dev/null 2>&1 || missing="node"
command -v npm >/dev/null 2>&1 || missing="${missing:+$missing and }npm"
if [[ -n "$missing" ]]; then
    echo "ensure-node-client: ${missing} not found on PATH: the Node client test will skip" \
        "(install Node.js >= 20.3, e.g. Debian: apt-get install nodejs npm)." >&2
    if [[ -n "${CI:-}" ]]; then
        echo "ensure-node-client: CI is set: Node.js is required there." >&2
        exit 1
    fi
    exit 0
fi

installed() {
    node -e 'const p = require(process.argv[1]); process.stdout.write(p.version)' \
        "${DIR}/node_modules/@temporalio/client/package.json" 2>/dev/null || true
}

if [[ "$(installed)" != "$VERSION" ]]; then
    echo "ensure-node-client: installing @temporalio/client@${VERSION} into ${DIR} (npm install)..." >&2
    mkdir -p "$DIR"
    cat >"${DIR}/package.json" <<JSON
{
  "name": "durable-agents-node-client",
  "private": true,
  "description": "Temporal's Node client for tests/outside_clients (scripts/ensure-node-client.sh)",
  "dependencies": { "@temporalio/client": "${VERSION}" }
}
JSON
    (cd "$DIR" && npm install --no-audit --no-fund --loglevel=error >&2)
    if [[ "$(installed)" != "$VERSION" ]]; then
        echo "ensure-node-client: npm install finished but @temporalio/client ${VERSION} is not in ${DIR}" >&2
        exit 1
    fi
    echo "ensure-node-client: @temporalio/client $(installed) in ${DIR}" >&2
fi
echo "$DIR"
