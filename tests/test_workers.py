"""`durable_agents._workers`: whether any worker polls a task queue (DescribeTaskQueue)."""

from __future__ import annotations

import asyncio
import inspect
import itertools
import time
from pathlib import Path

import pytest

from durable_agents import Agent, ScriptedToolCall, ScriptedTurn, build_worker, register_script
from durable_agents._workers import no_worker_message, worker_polling, workflow_pollers
from tests.agents import slow_tool, weather_agent
from tests.conftest import session_id


async def test_no_worker_polls_a_fresh_task_queue(env, task_queue):
    assert await workflow_pollers(env.client, task_queue) == []
    assert not await worker_polling(env.client, task_queue)


async def test_a_running_worker_polls_its_task_queue(env, task_queue, run_worker):
    async with run_worker([weather_agent]):
        deadline = time.monotonic() + 20
        while not await worker_polling(env.client, task_queue):  # its first poll takes a moment
            assert time.monotonic() < deadline, "the worker never showed as a poller"
            await asyncio.sleep(0.2)
        assert all(p.identity for p in await workflow_pollers(env.client, task_queue))


def test_the_no_worker_message_names_the_queue_and_the_command():
    assert no_worker_message("q1") == (
        "no worker is polling task queue 'q1' (start one with: durable-agents worker --agent MODULE:ATTR …)"
    )
    assert "durable-agents --task-queue q1 worker" in no_worker_message("q1", "durable-agents --task-queue q1")


async def test_build_worker_takes_the_tuning_a_host_needs(env, store, task_queue):
    from temporalio.worker import PollerBehaviorAutoscaling, PollerBehaviorSimpleMaximum

    from durable_agents import build_worker

    worker = build_worker(
        env.client,
        agents=[weather_agent],
        store=store,
        task_queue=task_queue,
        max_concurrent_activities=40,
        max_concurrent_local_activities=30,
        max_concurrent_workflow_tasks=20,
        max_cached_workflows=7,
        pollers="auto",
    )
    config = worker.config()
    assert (config["max_concurrent_activities"], config["max_concurrent_local_activities"]) == (40, 30)
    assert (config["max_concurrent_workflow_tasks"], config["max_cached_workflows"]) == (20, 7)
    assert isinstance(config["workflow_task_poller_behavior"], PollerBehaviorAutoscaling)
    default = build_worker(env.client, agents=[weather_agent], store=store, task_queue=f"{task_queue}-2").config()
    assert default["activity_task_poller_behavior"] == PollerBehaviorSimpleMaximum(5)


@pytest.mark.parametrize("pollers", [0, -1, "many", True])
async def test_a_wrong_poller_count_is_refused_saying_what_to_use(env, store, task_queue, pollers):
    from durable_agents import build_worker
    from durable_agents.checkpoint.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="use a number of pollers"):
        build_worker(env.client, agents=[weather_agent], store=store, task_queue=task_queue, pollers=pollers)


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--pollers", "lots"], "--pollers lots: use a number (1 or more) or 'auto'"),
        (["--sticky-timeout", "0"], "--sticky-timeout 0: use a positive number of seconds"),
        (["--max-concurrent-activities", "0"], "--max-concurrent-activities 0: use a positive number"),
        (["--max-concurrent-workflow-tasks", "0"], "--max-concurrent-workflow-tasks 0: use a positive number"),
    ],
)
def test_the_worker_command_refuses_wrong_tuning_before_it_connects(tmp_path, flags, says):
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "durable_agents.cli", "--address", "127.0.0.1:1", "--store"]
    cmd += [f"sqlite:///{tmp_path / 's.db'}", "worker", "--agent", "tests.agents:weather_agent", *flags]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=Path(__file__).parents[1])
    assert done.returncode == 2, done.stderr
    assert says in done.stderr


register_script(
    "one-long-tool",
    [
        ScriptedTurn(tool_calls=[ScriptedToolCall(name="slow_tool", arguments={"seconds": 5})]),
        ScriptedTurn(text="Done."),
    ],
)
long_tool_agent = Agent(name="long-tool", model="scripted:one-long-tool", tools=[slow_tool])


async def test_a_running_tool_heartbeats_to_the_server_every_second_so_a_busy_worker_keeps_slack(run_worker):
    """The SDK holds heartbeats back to 80 % of the timeout (1.6 s of 2 s: 0.4 s of slack, which a
    busy host's event loop or server eats, and a live call is then retried: paid twice). The
    worker sends them at most 1 s apart instead."""
    async with run_worker([long_tool_agent]) as client:
        sid = session_id()
        handle = await client.start("long-tool", "Go.", session_id=sid)
        beats: list[float] = []
        deadline = time.monotonic() + 30
        while len(beats) < 4:
            assert time.monotonic() < deadline, f"heartbeats seen: {beats}"
            pending = (await handle.describe()).raw_description.pending_activities
            for activity in pending:
                if activity.activity_type.name == "durable_agents.execute_tool" and activity.HasField(
                    "last_heartbeat_time"
                ):
                    beat = activity.last_heartbeat_time.ToDatetime().timestamp()
                    if beat not in beats:
                        beats.append(beat)
            await asyncio.sleep(0.1)
        gaps = [b - a for a, b in itertools.pairwise(beats)]
        assert max(gaps) <= 1.3, f"seconds between heartbeats the server saw: {gaps}"
        assert (await client.result(sid, handle)).text == "Done."


def test_a_worker_imports_its_agents_provider_sdks_when_it_is_built_not_in_the_first_model_call(tmp_path):
    """``import anthropic`` takes seconds of CPU; in the first model call's activity it stalls the
    worker's event loop: every other run's steps and heartbeats (a 2 s heartbeat then times out)."""
    import subprocess
    import sys

    script = f"""
import sys
from durable_agents import Agent, DurableAgentsPlugin, SummarizeOlder
from durable_agents.checkpoint import SqliteStore
agents = [
    Agent(name="a", model="anthropic:claude-x"),
    Agent(name="s", model="scripted:x", context=SummarizeOlder(max_turns=4, model="openai:gpt-x")),
]
before = [m in sys.modules for m in ("anthropic", "openai")]
DurableAgentsPlugin(agents=agents, store=SqliteStore({str(tmp_path / "store.db")!r}))
print(before, [m in sys.modules for m in ("anthropic", "openai")])
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[1]
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[False,", "False]", "[True,", "True]"]


@pytest.mark.parametrize("command", ["worker", "dev"])
def test_the_worker_flags_reach_build_worker(command):
    from durable_agents.cli import build_parser
    from durable_agents.cli.server import _tuning_of

    argv = [command, "--max-concurrent-workflow-tasks", "400", "--max-cached-workflows", "50", "--pollers", "auto"]
    argv += ["--agent", "tests.agents:weather_agent"]
    tuning = _tuning_of(build_parser().parse_args(argv))
    assert tuning["max_concurrent_workflow_tasks"] == 400 and tuning["max_cached_workflows"] == 50
    assert tuning["pollers"] == "auto" and tuning["max_concurrent_local_activities"] == 200
    assert set(tuning) <= set(inspect.signature(build_worker).parameters)  # every one a keyword it takes
