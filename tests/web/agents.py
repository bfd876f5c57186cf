"""The agents the web tests drive (scripted models: no network, no keys).

``web-payer`` asks for ``pay`` (needs a human's approval; ``amount_cents`` must be above 0)
and answers "Paid." once the call has a result. ``web-reader`` first reads a page whose
text is hostile HTML (a ``<script>`` and an ``<img onerror=…>``), then asks for ``pay`` with
a recipient carrying the same: what the inbox shows must stay text."""

from __future__ import annotations

from pydantic import BaseModel, Field

from durable_agents import Agent, ScriptedToolCall, ScriptedTurn, ToolContext, register_script, tool

PAYER = "web-payer"
READER = "web-reader"
AMOUNT = 4200
RECIPIENT = "ACME Ltd"
HOSTILE = '<script>window.__pwned = "script"</script><img src="x" onerror="window.__pwned = \'img\'">'

PAID: list[tuple[str, dict]] = []
"""(session id, arguments) of every ``pay`` that ran in this process."""


class Payment(BaseModel):
    amount_cents: int = Field(gt=0, le=10_000_000, description="in cents, above 0")
    recipient: str = Field(min_length=1, max_length=200)


class Page(BaseModel):
    url: str


@tool(needs_approval=True)
async def pay(args: Payment, ctx: ToolContext) -> dict:
    """Pay a recipient (a human approves it first)."""
    PAID.append((ctx.session_id, args.model_dump()))
    return {"paid_cents": args.amount_cents, "recipient": args.recipient}


@tool(safe_to_retry=True)
async def read_page(args: Page, ctx: ToolContext) -> dict:
    """Read a web page (here: one that carries hostile markup)."""
    return {"url": args.url, "text": f"Great offer! {HOSTILE}"}


register_script(
    "web-pay",
    [
        ScriptedTurn(
            text="Paying as asked.",
            tool_calls=[ScriptedToolCall(name="pay", arguments={"amount_cents": AMOUNT, "recipient": RECIPIENT})],
        ),
        ScriptedTurn(text="Paid."),
    ],
)
register_script(
    "web-read",
    [
        ScriptedTurn(
            text="Reading the page.",
            tool_calls=[ScriptedToolCall(name="read_page", arguments={"url": "https://x.example/"})],
        ),
        ScriptedTurn(
            text=f"The page says: {HOSTILE}",
            tool_calls=[ScriptedToolCall(name="pay", arguments={"amount_cents": 100, "recipient": HOSTILE})],
        ),
        ScriptedTurn(text="Done."),
    ],
)

payer = Agent(name=PAYER, model="scripted:web-pay", instructions="You pay when asked.", tools=[pay])
reader = Agent(name=READER, model="scripted:web-read", instructions="You read pages.", tools=[read_page, pay])


def paid_in(session_id: str) -> list[dict]:
    return [args for sid, args in PAID if sid == session_id]


register_script(
    "web-boss",
    [
        ScriptedTurn(
            text="Asking the payer.", tool_calls=[ScriptedToolCall(name="pay_team", arguments={"task": "Pay ACME"})]
        ),
        ScriptedTurn(text="Boss done."),
    ],
)
boss = Agent(
    name="web-boss",
    model="scripted:web-boss",
    instructions="You delegate payments.",
    subagents=[payer.as_tool(name="pay_team", description="Ask the payer to pay")],
)
"""Delegates to ``web-payer`` as a sub-agent: the payer's ``pay`` waits in the boss's session."""
