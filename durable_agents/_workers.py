"""Is any worker polling a task queue?

A run (or a fork) started on a task queue that no worker polls waits, silently,
until one does. Temporal's ``DescribeTaskQueue`` lists the pollers it has seen
on a queue: here, those polling for workflow tasks, the ones that would pick up
a run's first task.

What the list can and cannot tell: an empty list means that no worker has
polled the queue lately; a worker that has just started may not have polled
yet (a second or so); and Temporal keeps a stopped worker in the list for a few
minutes after its last poll, so a worker killed a minute ago still counts.
"""

from __future__ import annotations

from temporalio.api.enums.v1 import TaskQueueKind, TaskQueueType
from temporalio.api.taskqueue.v1 import PollerInfo, TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

__all__ = ["no_worker_message", "worker_polling", "workflow_pollers"]


async def workflow_pollers(client: Client, task_queue: str) -> list[PollerInfo]:
    """The workers Temporal has seen polling ``task_queue`` for workflow tasks lately."""
    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    return list(response.pollers)


async def worker_polling(client: Client, task_queue: str) -> bool:
    """Whether any worker polls ``task_queue`` for workflow tasks (see the module docstring)."""
    return bool(await workflow_pollers(client, task_queue))


def no_worker_message(task_queue: str, command: str = "durable-agents") -> str:
    """``no worker is polling task queue 'q' (start one with: … worker --agent MODULE:ATTR …)``.

    ``command`` is how to call the CLI (with the global flags that reach the queue).
    """
    return f"no worker is polling task queue {task_queue!r} (start one with: {command} worker --agent MODULE:ATTR …)"
