"""`durable-agents worker --budgets MODULE:ATTR [--fair-share MODULE:ATTR]`: a fleet started from
the command line declares its provider rate limits (issue 33); a wrong name is one clear line."""

from __future__ import annotations

import subprocess
import time
import uuid

import pytest

from tests.cli.conftest import CLI, ROOT, Cli, one_line_error, session_id, stop


def test_a_worker_started_with_budgets_says_them_and_runs_within_them(cli: Cli, tmp_path) -> None:
    queue = f"budgets-{uuid.uuid4().hex[:6]}"
    here = Cli(cli.address, queue, cli.store_path, cli.env)  # its own task queue: only this worker serves it
    log = tmp_path / "worker.log"
    with log.open("w") as handle:
        worker = subprocess.Popen(
            [*CLI, *here.flags, "worker", "--agent", "tests.cli.agents_cli:greeter_agent",
             "--budgets", "tests.cli.agents_cli:BUDGETS", "--fair-share", "tests.cli.agents_cli:BY_SESSION"],
            cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while "rate-limit budgets" not in log.read_text():
            assert worker.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        said = log.read_text()
        assert "scripted:* 600 requests a minute, openai:gpt-4o 30,000 tokens a minute" in said, said
        out = here.ok("run", "greeter", "hi", "--session", session_id("budgeted"))
        assert "hello" in out.lower(), out
    finally:
        stop(worker)


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--budgets", "no_such_module:BUDGETS"], "--budgets 'no_such_module:BUDGETS': cannot import"),
        (["--budgets", "tests.cli.agents_cli:NOT_A_BUDGET"], "is not a Budget (or a list of Budgets)"),
        (["--budgets", "tests.cli.agents_cli"], "write it as module:attribute"),
        (["--fair-share", "tests.cli.agents_cli:BY_SESSION"], "--fair-share orders calls waiting for budget"),
    ],
    ids=["no-module", "not-a-budget", "no-attribute", "fair-share-alone"],
)
def test_a_wrong_budget_flag_is_one_clear_line(cli: Cli, flags: list[str], needle: str) -> None:
    out = cli("worker", "--agent", "tests.cli.agents_cli:greeter_agent", *flags, timeout=60)
    one_line_error(out, 2, needle)
