"""What a user defines: the agent (``agent``), its tools (``tools``), hooks (``hooks``),
MCP servers (``mcp``), structured output (``output``) and sub-agents (``agent``).

All of it is re-exported by ``durable_agents`` (``from durable_agents import Agent,
tool``). The activities run what is defined here; the workflows only ever see its
data (a ``RunConfig``, tool specs).
"""
