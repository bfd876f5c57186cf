"""A save's header text and its history key come from one serialization (``header_texts``):
both must be exactly what ``to_json()`` and ``header_key`` give (with the decisions kept apart:
the same JSON, and the key without them), whatever the header holds
(a store compares history keys as text, and readers parse the stored text)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from durable_agents.checkpoint.format import CheckpointHeader, Decision
from durable_agents.checkpoint.stores._common import header_key, header_texts

pytestmark = pytest.mark.unit

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=3),
    max_leaves=12,
)
tricky_text = st.sampled_from(["", ',"messageCount":', ',"updatedAt":"x"', "}", '"\\', "é\u2028"])
moments = st.datetimes(
    min_value=datetime(1970, 1, 2), timezones=st.sampled_from([UTC, timezone(timedelta(hours=-5, minutes=-30))])
)


@settings(max_examples=300, deadline=None)
@given(
    state=json_values | tricky_text,
    output=json_values | tricky_text,
    updated_at=st.none() | moments,
    count=st.integers(min_value=0, max_value=10**9),
    decisions=st.lists(
        st.builds(
            Decision,
            approval_id=st.text(max_size=8),
            tool_call_id=st.text(max_size=8),
            tool_name=st.just("t"),
            approved=st.booleans(),
            decided_at=moments,
            note=tricky_text,
        ),
        max_size=3,
    ),
)
def test_a_headers_text_and_key_are_what_to_json_and_header_key_give(state, output, updated_at, count, decisions):
    header = CheckpointHeader(
        session_id="s",
        business_state=state,
        output=output,
        updated_at=updated_at,
        message_count=count,
        decisions=decisions or None,
    )
    raw, key = header_texts(header)
    assert raw == header.to_json()
    assert key == header_key(header) == header.model_copy(update={"updated_at": None}).to_json()
    assert CheckpointHeader.model_validate_json(raw) == CheckpointHeader.model_validate(json.loads(header.to_json()))
    if header.decisions is not None:  # kept apart (a store's history): the key leaves them out, the text has them
        raw, key = header_texts(header, [d.to_json() for d in header.decisions])
        assert json.loads(raw) == json.loads(header.to_json())
        assert key == header.model_copy(update={"updated_at": None, "decisions": None}).to_json()


def test_a_subclass_with_fields_of_its_own_is_serialized_as_it_is():
    class Later(CheckpointHeader):
        extra: int = 7

    header = Later(session_id="s", updated_at=datetime(2026, 1, 2, 3, 4, 5, 678901, UTC), message_count=3)
    assert header_texts(header) == (header.to_json(), header_key(header))
