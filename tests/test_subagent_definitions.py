"""Sub-agent definitions, ids and the checkpoint fields, without a server."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from durable_agents import Agent, ConfigurationError, tool
from durable_agents.agent.agent import SESSION_ID_BYTES, SubagentTask, subagent_session_id, with_subagents
from durable_agents.checkpoint.fork import Patch, fork
from durable_agents.checkpoint.format import Checkpoint, CheckpointHeader, Message, SubagentApproval, ToolCall
from durable_agents.checkpoint.stores.memory import MemoryStore
from durable_agents.plugin import DurableAgentsPlugin
from tests import subagent_agents as sa


def agent(name: str, **kwargs) -> Agent:
    return Agent(name=name, model="scripted:x", **kwargs)


def test_a_subagent_is_a_tool_the_model_sees_with_a_task_input():
    helper = agent("helper", instructions="You look things up.\nCarefully.")
    boss = agent("boss", subagents=[helper])
    (spec,) = boss.run_config().tools
    assert (spec.name, spec.subagent) == ("helper", "helper")
    assert spec.input_schema["required"] == ["task"] and spec.input_schema["properties"]["task"]["type"] == "string"
    assert spec.description == "Delegate a task to the helper agent (You look things up.)."
    assert boss.has_tool("helper") and boss.tool_named("helper") is None  # not a tool the tool activity runs
    assert boss.subagent_named("helper").agent is helper


def test_as_tool_names_describes_and_declares_an_input_model():
    class Brief(BaseModel):
        city: str
        days: int

    planner = agent("trip.planner")
    assert planner.as_tool().name == "trip_planner"  # a tool name models accept
    sub = planner.as_tool(name="plan", description="Plan a trip", input_model=Brief)
    boss = agent("boss", subagents=[sub])
    (spec,) = boss.run_config().tools
    assert (spec.name, spec.description, spec.input_schema["required"]) == ("plan", "Plan a trip", ["city", "days"])
    assert json.loads(sub.task_message(Brief(city="Rome", days=2)).content) == {"city": "Rome", "days": 2}
    assert planner.as_tool().task_message(SubagentTask(task="hi")).content == "hi"  # the task's text, as is
    with pytest.raises(ConfigurationError, match="not valid for model APIs"):
        planner.as_tool(name="has space")
    with pytest.raises(ConfigurationError, match="input_model must be a pydantic model"):
        planner.as_tool(input_model=dict)  # type: ignore[arg-type]


def test_cycles_are_refused_when_the_agent_is_built():
    a_again = agent("a")
    b = agent("b", subagents=[agent("c", subagents=[a_again])])
    with pytest.raises(ConfigurationError, match=r"cycle \(a -> b -> c -> a\)"):
        agent("a", subagents=[b])


def test_depth_beyond_the_limit_and_ambiguous_names_are_refused():
    deep = agent("l1", subagents=[agent("l2", subagents=[agent("l3")])])
    assert agent("top", subagents=[deep]).max_subagent_depth == 3  # 3 deep: the default allows it
    with pytest.raises(ConfigurationError, match="nest 3 deep, more than its max_subagent_depth \\(2\\)"):
        agent("top", subagents=[deep], max_subagent_depth=2)
    with pytest.raises(ConfigurationError, match="two different agents named 'twin'"):
        agent("top", subagents=[agent("x", subagents=[agent("twin")]), agent("twin", instructions="other")])
    with pytest.raises(ConfigurationError, match="max_subagent_depth must be 0 or more"):
        agent("top", max_subagent_depth=-1)


def test_a_subagent_name_may_not_clash_with_a_tool_and_must_be_an_agent():
    @tool
    async def helper(args: SubagentTask, ctx) -> str:
        return "x"

    with pytest.raises(ConfigurationError, match="named 'helper' already"):
        agent("boss", tools=[helper], subagents=[agent("helper")])
    with pytest.raises(ConfigurationError, match="is not an Agent"):
        agent("boss", subagents=["helper"])


def test_the_fingerprint_covers_the_agents_own_tools_not_its_subagents():
    assert agent("boss", subagents=[agent("helper")]).fingerprint() == agent("boss").fingerprint()


def test_a_worker_serves_every_subagent_below_its_agents():
    found = with_subagents([sa.chief, sa.lead])
    assert [a.name for a in found] == ["chief", "lead", "researcher", "writer"]
    DurableAgentsPlugin(agents=[sa.chief], store=MemoryStore(), allow_memory_store=True)  # builds: one per name
    other_writer = agent("writer")
    with pytest.raises(ConfigurationError, match="two agents are named 'writer'"):
        DurableAgentsPlugin(agents=[sa.lead, other_writer], store=MemoryStore(), allow_memory_store=True)


def test_subagent_session_ids_derive_from_the_parent_and_position_and_always_fit():
    assert subagent_session_id("chat-42", 5) == "chat-42/5"
    long_one = "é" * 600  # 1,200 bytes
    made = subagent_session_id(long_one, 17)
    assert len(made.encode()) <= SESSION_ID_BYTES and made.endswith("/17") and made.startswith("é")
    assert made == subagent_session_id(long_one, 17) != subagent_session_id(long_one + "x", 17)


def test_the_new_checkpoint_fields_round_trip_in_camel_case_and_old_records_load():
    snap = SubagentApproval(
        session_id="p/3",
        agent="writer",
        approval_id="ap-1",
        tool_call=ToolCall(id="c1", name="publish", arguments={"text": "hi"}),
        subagent_approval=SubagentApproval(session_id="p/3/4", approval_id="ap-1"),
    )
    header = CheckpointHeader(session_id="p", parent_session_id="q", parent_tool_call_id="c0", subagent_approval=snap)
    data = json.loads(header.to_json())
    assert data["parentSessionId"] == "q" and data["parentToolCallId"] == "c0"
    assert data["subagentApproval"]["toolCall"]["name"] == "publish"
    assert data["subagentApproval"]["subagentApproval"]["sessionId"] == "p/3/4"
    again = CheckpointHeader.model_validate(data)
    assert again == header and again.subagent_approval.innermost().session_id == "p/3/4"
    old = CheckpointHeader.model_validate({"sessionId": "old", "formatVersion": 2})
    assert old.parent_session_id is None and old.subagent_approval is None


def test_a_fork_of_a_subagent_session_stands_alone():
    store = MemoryStore()
    source = Checkpoint(
        session_id="p/3",
        parent_session_id="p",
        parent_tool_call_id="c",
        parent_session_uid="u",
        messages=[Message.user("task"), Message(role="assistant", content="done")],
        step_index=1,
    )
    store.save(source)
    made = fork(store, "p/3", from_step=1, patch=Patch())
    header = store.load_header(made.session_id)
    assert (header.parent_session_id, header.parent_tool_call_id, header.parent_session_uid) == (None, None, None)
