"""What a run's Temporal history says it scheduled: its activities as regular ones and as local
ones (their markers), in order, and when its first model turn came."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from temporalio.api.enums.v1 import EventType

from durable_agents.activities.contracts import MODEL_TURN


@dataclass
class Scheduled:
    regular: list[str] = field(default_factory=list)
    """Activity types scheduled as regular activities."""
    local: list[str] = field(default_factory=list)
    """Activity types run as local activities (a marker each; ``workflow.patched()`` markers left out)."""
    tasks_before_model: int | None = None
    """Workflow tasks completed before the first model turn was recorded (a local activity's
    marker follows the completion of the workflow task that ran it); None: no model turn."""


async def scheduled(client, workflow_id: str, run_id: str | None = None) -> Scheduled:
    history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    found, tasks = Scheduled(), 0
    for e in history.events:
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            tasks += 1
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            found.regular.append(e.activity_task_scheduled_event_attributes.activity_type.name)
        elif (
            e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
            and e.marker_recorded_event_attributes.marker_name != "core_patch"  # a workflow.patched() marker
        ):
            data = e.marker_recorded_event_attributes.details["data"].payloads[0].data
            found.local.append(json.loads(data)["activity_type"])
        if found.tasks_before_model is None and MODEL_TURN in found.regular + found.local:
            found.tasks_before_model = tasks
    return found
