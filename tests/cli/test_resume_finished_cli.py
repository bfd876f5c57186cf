"""`resume` of a finished session (the agent gave its answer) would make one more model call
with no new input, which a real model bills: it is refused in one line that says how to go
on (new input with `run`, or `--force`), from the CLI and from Python (``force=True``). A
session stopped at its step limit is not done: `resume` gives it more steps."""

from __future__ import annotations

import pytest

from durable_agents.checkpoint import SqliteStore
from durable_agents.client import AgentClient
from durable_agents.errors import SessionFinishedError
from tests.cli.conftest import one_line_error, session_id
from tests.cli.test_wording_cli import no_python_wording

pytestmark = pytest.mark.integration


def _steps(cli, sid: str) -> tuple[int, int]:
    store = SqliteStore(cli.store_path)
    try:
        header = store.load_header(sid)
        return header.step_index, header.message_count
    finally:
        store.close()


def test_resume_of_a_finished_session_is_refused_and_force_makes_the_turn(cli):
    sid = session_id("done")
    cli.ok("run", "greeter", "hi", "--session", sid)
    before = _steps(cli, sid)
    err = no_python_wording(one_line_error(cli("resume", sid), 1, f"session {sid!r} is finished"))
    assert "no new input" in err and f"run greeter 'your message' --session {sid}" in err and "--force" in err
    err = no_python_wording(one_line_error(cli("run", "greeter", "--session", sid), 1, "is finished"))
    assert "--force" in err  # `run` without input resumes too: refused the same way
    assert _steps(cli, sid) == before, "a refused resume called the model"

    forced = cli("resume", sid, "--force")
    assert forced.returncode == 0, forced.stderr
    assert f"session {sid}: stop" in forced.stdout
    assert _steps(cli, sid)[0] == before[0] + 1  # one more model turn


def test_resume_of_a_session_stopped_at_its_step_limit_runs_more_steps(cli):
    sid = session_id("loop")
    out = cli("run", "looper", "go", "--session", sid)
    assert out.returncode == 0 and f"session {sid}: max-steps" in out.stdout, (out.stdout, out.stderr)
    steps = _steps(cli, sid)[0]
    again = cli("resume", sid)
    assert again.returncode == 0, again.stderr
    assert _steps(cli, sid)[0] > steps


async def test_python_resume_of_a_finished_session_raises_unless_forced(cli, env):
    sid = session_id("py-done")
    cli.ok("run", "greeter", "hi", "--session", sid)
    store = SqliteStore(cli.store_path)
    try:
        client = AgentClient(env.client, store, cli.task_queue)
        with pytest.raises(SessionFinishedError) as raised:
            await client.resume(sid)
        assert raised.value.session_id == sid and raised.value.code == "SESSION_FINISHED"
        assert "force=True" in str(raised.value) and "no new input" in str(raised.value)
        steps = store.load_header(sid).step_index
        result = await client.resume(sid, force=True)
        assert result.finish_reason == "stop" and store.load_header(sid).step_index == steps + 1
    finally:
        store.close()
