"""`durable_agents._workers`: whether any worker polls a task queue (DescribeTaskQueue)."""

from __future__ import annotations

import asyncio
import time

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
