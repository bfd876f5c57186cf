#!/usr/bin/env bash
# Make sure PostgreSQL's server binaries (initdb, pg_ctl) are installed, so the
# test suite can start a throwaway cluster of its own. Idempotent; never starts
# or relies on the system service. Called by `make test`.
set -euo pipefail

have_binaries() {
    compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null &&
        compgen -G '/usr/lib/postgresql/*/bin/pg_ctl' >/dev/null
}

if [[ -n "${DURABLE_AGENTS_TEST_POSTGRES_URL:-}" ]] || have_binaries; then
    exit 0
fi

if [[ "$(id -u)" -ne 0 ]]; then
    echo "ensure-postgres: PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin." >&2
    echo "  Install them as root (Debian/Ubuntu: apt-get install postgresql), or set" >&2
    echo "  DURABLE_AGENTS_TEST_POSTGRES_URL to a database the tests may create schemas in." >&2
    exit 1
fi
if ! command -v apt-get >/dev/null; then
    echo "ensure-postgres: no apt-get here; install PostgreSQL's server (initdb, pg_ctl) yourself" >&2
    echo "  or set DURABLE_AGENTS_TEST_POSTGRES_URL." >&2
    exit 1
fi

echo "ensure-postgres: installing PostgreSQL server binaries (apt-get install postgresql)..." >&2
export DEBIAN_FRONTEND=noninteractive
# Keep the package's maintainer scripts from starting the system cluster service
# (policy-rc.d is honoured by invoke-rc.d; restored afterwards).
policy=/usr/sbin/policy-rc.d
created_policy=0
if [[ ! -e "$policy" ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    created_policy=1
fi
cleanup() { if [[ "$created_policy" -eq 1 ]]; then rm -f "$policy"; fi; }
trap cleanup EXIT

apt-get update -qq
apt-get install -y -qq --no-install-recommends postgresql >/dev/null

if ! have_binaries; then
    echo "ensure-postgres: postgresql installed but initdb/pg_ctl are still missing" >&2
    exit 1
fi
echo "ensure-postgres: $(compgen -G '/usr/lib/postgresql/*/bin/initdb' | head -n1) ready" >&2
