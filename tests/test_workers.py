"""`durable_agents._workers`: whether any worker polls a task queue (DescribeTaskQueue)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from durable_agents._workers import no_worker_message, worker_polling, workflow_pollers
from tests.agents import weather_agent


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
