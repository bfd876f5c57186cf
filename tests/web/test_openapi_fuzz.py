"""The served OpenAPI spec fuzzed with Schemathesis (its CLI, in a process of its own, against
the live server and worker): valid and invalid parameters and bodies on every operation,
as an operator (every operation is open to it), and no answer is a server error (5xx).

Two runs: the event stream without the stateful phase (on a real session a followed stream
stays open until the client leaves, which a fuzzer's request does only at its timeout); then
every other operation through all phases (the stateful phase feeds ids from answers into
other calls, so real sessions get decided and forked)."""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path

import pytest

from tests.web.conftest import Served

pytestmark = pytest.mark.integration

EXAMPLES = 25
"""Test cases per operation and phase: enough to reach each refusal, in about a minute."""
EVENTS = "/api/sessions/{session_id}/events"


async def _schemathesis(served: Served, folder: Path, *flags: str) -> str:
    found = shutil.which("schemathesis", path=str(Path(sys.executable).parent))
    assert found, "schemathesis is not installed: run `make install` (it is in the test extra)"
    log = folder / "schemathesis.log"
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            found,
            "run",
            f"{served.url}/openapi.json",
            "--checks=not_a_server_error",
            f"--max-examples={EXAMPLES}",
            "--workers=1",
            "--seed=31",
            "--generation-database=none",
            f"--header=Authorization: Bearer {served.tokens['olga']}",
            "--request-timeout=30",
            "--no-color",
            f"--report-dir={folder}",
            *flags,
            stdout=out,
            stderr=asyncio.subprocess.STDOUT,
            cwd=folder,
        )
        try:
            await asyncio.wait_for(proc.wait(), 420)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            tail = log.read_text(errors="replace")[-3000:]
            raise AssertionError(f"schemathesis did not finish in 420 s: {tail}") from None
    text = log.read_text(errors="replace")
    assert proc.returncode == 0, text[-6000:]
    return text


async def test_no_operation_of_the_spec_answers_a_server_error(served: Served, tmp_path: Path):
    await served.waiting(prefix="fuzz")  # the listings hold a real waiting call, for the stateful phase
    before = len(served.answered)
    (tmp_path / "all").mkdir()
    (tmp_path / "events").mkdir()
    # the stream first: the stateful run forks into ids it makes up ("0", "A"), and a followed
    # stream of an existing session stays open
    await _schemathesis(served, tmp_path / "events", f"--include-path={EVENTS}", "--phases=examples,coverage,fuzzing")
    await _schemathesis(served, tmp_path / "all", f"--exclude-path={EVENTS}")
    answered = served.answered[before:]
    assert [a for a in answered if a[2] >= 500] == []
    assert len(answered) > 200, f"schemathesis sent only {len(answered)} requests"
    assert any(path.endswith("/events") for _, path, _ in answered)
