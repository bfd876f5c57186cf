"""`run`, `resume`, `cancel`: outcomes, live progress, the Temporal UI link."""

from __future__ import annotations

import os
import pty
import shlex
import subprocess
import time

from durable_agents.checkpoint import SqliteStore
from durable_agents.client.result import RunResult
from tests.cli.conftest import CLI, ROOT, one_line_error, session_id

UI = "http://ui.test:8233"


def test_run_prints_the_conversation(cli):
    sid = session_id()
    out = cli("run", "booker", "Book a table for 2 tonight", "--session", sid)
    assert out.returncode == 0, out.stderr
    assert "get_weather" in out.stdout and "book_table" in out.stdout
    assert f"session {sid}: stop, 3 steps, 3 tool calls" in out.stdout


def test_run_by_module_attr_json_parses_back_into_the_result_model(cli):
    sid = session_id()
    out = cli("run", "tests.agents:looping_agent", "loop", "--session", sid, "--json")
    assert out.returncode == 0, out.stderr
    result = RunResult.model_validate_json(out.stdout)
    assert result.finish_reason == "max-steps" and result.steps == 4
    assert '"finishReason"' in out.stdout  # the documented camelCase format


def test_run_shows_live_progress_and_ends_with_the_ui_link(cli):
    sid = session_id()
    out = cli("run", "napper", "Take a nap", "--session", sid, "--progress", "--ui-url", UI)
    assert out.returncode == 0, out.stderr
    progress = [line for line in out.stderr.splitlines() if f"] {sid}: " in line]
    assert any("tool nap" in line for line in progress), out.stderr
    assert len(progress) == len(set(line.split("] ", 1)[1] for line in progress))  # only changes
    assert f"session {sid}: stop, 2 steps, 1 tool call," in out.stdout
    assert out.stdout.rstrip().endswith(f"Temporal UI: {UI}/namespaces/default/workflows/{sid}")


def test_progress_is_on_by_itself_when_stderr_is_a_terminal(cli):
    sid = session_id()
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            [*CLI, *cli.flags, "run", "napper", "nap", "--session", sid],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=follower,
            text=True,
        )
        stdout, _ = proc.communicate(timeout=120)
        os.close(follower)
        follower = -1
        seen = b""
        while True:  # what the terminal got
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO once the other side is closed and drained
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if follower != -1:
            os.close(follower)
        os.close(leader)
    assert proc.returncode == 0 and f"session {sid}: stop" in stdout
    assert f"{sid}: step 1 · tool nap" in seen.decode()


def test_progress_is_off_when_stderr_is_not_a_terminal_and_the_ui_comes_from_the_env(cli):
    sid = session_id()
    out = cli("run", "napper", "nap", "--session", sid, env={"DURABLE_AGENTS_UI_URL": UI + "/"})
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    assert f"Temporal UI: {UI}/namespaces/default/workflows/{sid}" in out.stdout


def test_run_json_parses_back_and_the_link_goes_to_stderr(cli):
    sid = session_id()
    out = cli("run", "booker", "Book a table for 2", "--session", sid, "--json", "--ui-url", UI)
    assert out.returncode == 0, out.stderr
    result = RunResult.model_validate_json(out.stdout)
    assert result.finish_reason == "stop" and result.steps == 3 and len(result.tool_calls) == 3
    assert f"Temporal UI: {UI}/namespaces/default/workflows/{sid}" in out.stderr


def test_a_paused_run_prints_the_approval_and_a_command_that_decides_it(cli):
    sid = session_id()
    out = cli("run", "payments", "Charge the customer", "--session", sid)
    assert out.returncode == 0, out.stderr
    assert f"session {sid}: awaiting-approval" in out.stdout
    assert '⏸ charge_card({"amount":10})' in out.stdout
    assert 'then: charge_card({"amount":20})' in out.stdout
    approve = next(line for line in out.stdout.splitlines() if line.startswith("approve: "))
    argv = shlex.split(approve.removeprefix("approve: "))
    assert argv[0] == "durable-agents" and "--approval-id" in argv
    decided = cli.run_argv(CLI + argv[1:])
    assert decided.returncode == 0, decided.stderr
    assert f"session {sid}: awaiting-approval" in decided.stdout  # paused again, on the second charge
    assert '→ result   charge_card [call_1_1] {"charged": 10' in decided.stdout


def test_cancel_aborts_a_live_run_and_resume_continues_it(cli):
    sid = session_id()
    running = cli.popen("run", "slow", "Work on it", "--session", sid)
    store = SqliteStore(cli.store_path)
    try:
        deadline = time.monotonic() + 30
        while True:  # wait until the slow tool runs (the quick one has its result)
            header = store.load_header(sid)
            if header is not None and header.message_count >= 3:
                break
            assert time.monotonic() < deadline and running.poll() is None, running.communicate()
            time.sleep(0.1)
    finally:
        store.close()
    out = cli("cancel", sid)
    assert out.returncode == 0, out.stderr
    assert f"session {sid}: aborted" in out.stdout and f"resume {sid}" in out.stdout
    stdout, _ = running.communicate(timeout=60)
    assert f"session {sid}: aborted" in stdout
    shown = cli.ok("show", sid)
    assert "✗ error    slow_tool" in shown and "cancelled" in shown

    again = cli("cancel", sid)
    assert again.returncode == 0 and "no live run to cancel" in again.stderr

    resumed = cli("resume", sid)
    assert resumed.returncode == 0, resumed.stderr
    assert "Understood, changing course." in resumed.stdout
    assert f"session {sid}: stop" in resumed.stdout


def test_resume_and_cancel_of_an_unknown_session_exit_2(cli):
    for command in ("resume", "cancel"):
        one_line_error(cli(command, "no-such-session"), 2, "no session 'no-such-session'")
