"""What ``send()``, ``approve()`` and ``resume()`` return: ``RunResult``."""

from durable_agents._outcomes import RunResult

__all__ = ["RunResult"]
