#!/usr/bin/env bash
# Make sure a headless-capable Chromium is installed for the real-browser UI
# check (tests/cli/test_ui_browser.py). Idempotent: does nothing when
# `chromium` (or $DURABLE_AGENTS_CHROMIUM) is already there. Installs the
# Debian `chromium` package with apt-get when run as root. Called by `make test`.
set -euo pipefail

if [[ -n "${DURABLE_AGENTS_CHROMIUM:-}" && -x "${DURABLE_AGENTS_CHROMIUM}" ]]; then
    exit 0
fi
if command -v chromium >/dev/null 2>&1; then
    exit 0
fi

if [[ "$(id -u)" -ne 0 ]]; then
    echo "ensure-chromium: chromium not found. Install it as root (Debian/Ubuntu:" >&2
    echo "  apt-get install chromium), or set DURABLE_AGENTS_CHROMIUM to a chromium binary." >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-chromium: no apt-get here; install Chromium yourself and put \`chromium\` on PATH" >&2
    echo "  (or set DURABLE_AGENTS_CHROMIUM to its binary)." >&2
    exit 1
fi

echo "ensure-chromium: installing chromium (apt-get install chromium)..." >&2
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y --no-install-recommends chromium fonts-liberation >/dev/null 2>&1; then
    apt-get update -qq >/dev/null
    apt-get install -y --no-install-recommends chromium fonts-liberation >/dev/null
fi

if ! command -v chromium >/dev/null 2>&1; then
    echo "ensure-chromium: apt-get finished but \`chromium\` is still not on PATH" >&2
    exit 1
fi
echo "ensure-chromium: $(chromium --version 2>/dev/null || echo chromium installed)" >&2
