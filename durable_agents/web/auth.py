"""Who is asking, and what they may do: API tokens (kept hashed), a trusted proxy's identity
header, or anonymous access on loopback only.

Tokens are 256 random bits (``da_`` + 43 URL-safe characters), shown once when made and
kept as their SHA-256 in a JSON file (mode 0600). A salted slow hash (bcrypt, scrypt) guards
guessable passwords; a 256-bit random token cannot be guessed, so a plain SHA-256 is enough and
lets every request be checked without a per-request key derivation (GitHub and PyPI keep
their tokens the same way). A presented token's hash is compared with every kept hash in
constant time (``hmac.compare_digest``, no early exit), so timing tells nothing of which
prefix or which entry matched.

Roles: ``viewer`` reads everything; ``approver`` also decides approvals (only of the agents
and tools its entry names, when it names any); ``operator`` also forks sessions. The file is
read again when it changes, so ``durable-agents web-token add`` takes effect at once.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import ipaddress
import json
import os
import secrets
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Literal

from durable_agents.errors import ConfigurationError

TOKEN_PREFIX = "da_"


class Role(StrEnum):
    VIEWER = "viewer"
    APPROVER = "approver"
    OPERATOR = "operator"


@dataclass(frozen=True)
class Identity:
    """An authenticated caller: what a decision records as ``decidedBy``."""

    name: str
    roles: frozenset[Role]
    agents: frozenset[str] | None = None
    """The agents whose approvals an approver may decide (None: all)."""
    tools: frozenset[str] | None = None
    """The tools whose calls an approver may decide (None: all)."""
    via: str = "token"
    """How it was authenticated: ``token``, ``proxy`` or ``anonymous``."""

    def may_view(self) -> bool:
        return bool(self.roles)

    def may_decide(self, agent: str, tool: str) -> bool:
        if Role.APPROVER not in self.roles:
            return False
        return (self.agents is None or agent in self.agents) and (self.tools is None or tool in self.tools)

    def may_fork(self) -> bool:
        return Role.OPERATOR in self.roles

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "roles": sorted(self.roles),
            "agents": sorted(self.agents) if self.agents is not None else None,
            "tools": sorted(self.tools) if self.tools is not None else None,
            "via": self.via,
        }


def grant_refusal(
    identity: Identity, kind: str, agent: str | None, tool: str, *, verb: Literal["make", "revoke"] = "make"
) -> str | None:
    """Why ``identity`` may not make (or revoke) such a grant, or None: a grant never widens
    what the approver may decide. A ``tool`` grant covers every agent: it needs an approver
    not limited to some agents."""
    if Role.APPROVER not in identity.roles:
        return f"{identity.name} is not an approver: only approvers {verb} grants"
    if identity.tools is not None and tool not in identity.tools:
        return f"{identity.name} may not decide calls of {tool}, so may not {verb} grants for them"
    if kind == "tool":
        if identity.agents is not None:
            return (
                f"{identity.name} decides the calls of {', '.join(sorted(identity.agents))} only: a tool grant "
                "holds for every agent; grant for an agent or a session instead"
            )
        return None
    if identity.agents is not None and agent not in identity.agents:
        return f"{identity.name} may not decide {agent}'s calls, so may not {verb} grants for them"
    return None


def roles_of(names: Iterable[str]) -> frozenset[Role]:
    try:
        return frozenset(Role(n) for n in names)
    except ValueError as e:
        raise ConfigurationError(f"unknown role in {list(names)!r}: roles are {', '.join(Role)}") from e


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class TokenEntry:
    name: str
    sha256: str
    roles: frozenset[Role]
    agents: frozenset[str] | None = None
    tools: frozenset[str] | None = None
    created_at: str | None = None

    def identity(self, via: str = "token") -> Identity:
        return Identity(self.name, self.roles, self.agents, self.tools, via)

    def to_dict(self) -> dict[str, object]:
        found: dict[str, object] = {"name": self.name, "sha256": self.sha256, "roles": sorted(self.roles)}
        if self.agents is not None:
            found["agents"] = sorted(self.agents)
        if self.tools is not None:
            found["tools"] = sorted(self.tools)
        if self.created_at:
            found["createdAt"] = self.created_at
        return found

    @classmethod
    def of(cls, raw: dict) -> TokenEntry:
        agents, tools = raw.get("agents"), raw.get("tools")
        return cls(
            name=str(raw["name"]),
            sha256=str(raw["sha256"]).lower(),
            roles=roles_of(raw.get("roles") or []),
            agents=frozenset(agents) if agents is not None else None,
            tools=frozenset(tools) if tools is not None else None,
            created_at=raw.get("createdAt"),
        )


class TokenFile:
    """The API tokens, hashed, in a JSON file: ``{"tokens": [{name, sha256, roles, agents?, tools?}]}``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._seen: tuple[int, int] | None = None
        self._entries: list[TokenEntry] = []

    # -- reading ----------------------------------------------------------------------------
    def entries(self) -> list[TokenEntry]:
        """The file's entries, read again when its size or modification time changed."""
        with self._lock:
            try:
                st = self.path.stat()
            except FileNotFoundError:
                self._seen, self._entries = None, []
                return []
            stamp = (st.st_mtime_ns, st.st_size)
            if stamp != self._seen:
                self._entries = self._read()
                self._seen = stamp
            return list(self._entries)

    def _read(self) -> list[TokenEntry]:
        try:
            raw = json.loads(self.path.read_text() or "{}")
            return [TokenEntry.of(e) for e in raw.get("tokens", [])]
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ConfigurationError(f"tokens file {self.path} is not valid ({e}): fix or remove it") from e

    def find(self, token: str) -> TokenEntry | None:
        """The entry of ``token``; every kept hash is compared, in constant time."""
        presented = token_hash(token)
        found = None
        for entry in self.entries():
            if hmac.compare_digest(presented, entry.sha256):
                found = entry
        return found

    def named(self, name: str) -> TokenEntry | None:
        return next((e for e in self.entries() if e.name == name), None)

    # -- writing ----------------------------------------------------------------------------
    def add(
        self,
        name: str,
        roles: Sequence[str],
        *,
        agents: Sequence[str] | None = None,
        tools: Sequence[str] | None = None,
    ) -> str:
        """Make a token for ``name`` and keep its hash; return the token (shown only now)."""
        if not name.strip():
            raise ConfigurationError("a token needs a name (who it identifies)")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        entry = TokenEntry(
            name=name,
            sha256=token_hash(token),
            roles=roles_of(roles),
            agents=frozenset(agents) if agents else None,
            tools=frozenset(tools) if tools else None,
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        self._write([*self.entries(), entry])
        return token

    def revoke(self, name: str) -> int:
        """Drop every token of ``name``; return how many there were."""
        kept = [e for e in self.entries() if e.name != name]
        dropped = len(self.entries()) - len(kept)
        if dropped:
            self._write(kept)
        return dropped

    def _write(self, entries: list[TokenEntry]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"tokens": [e.to_dict() for e in entries]}, indent=2) + "\n"
        tmp = self.path.with_name(f".{self.path.name}.{secrets.token_hex(4)}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # owner only, from the start
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, self.path)
        with self._lock:
            self._seen = None


# -- failed logins ------------------------------------------------------------------------------
@dataclass
class LoginThrottle:
    """Failed authentications slowed down, per client address: the n-th failure within
    ``window`` seconds waits ``base_delay * 2**(n-1)`` (at most ``max_delay``) before it is
    answered, and past ``limit`` failures the address is refused (429) until the window
    moves on. A successful login does not clear the count: only time does."""

    limit: int = 10
    window: float = 300.0
    base_delay: float = 0.25
    max_delay: float = 4.0
    _failures: dict[str, deque[float]] = field(default_factory=dict)

    def _recent(self, client: str) -> deque[float]:
        now = time.monotonic()
        failures = self._failures.setdefault(client, deque())
        while failures and failures[0] < now - self.window:
            failures.popleft()
        if not failures:
            self._failures.pop(client, None)
        return failures

    def blocked_for(self, client: str) -> float | None:
        """Seconds until ``client`` may try again, or None when it may now."""
        failures = self._recent(client)
        if len(failures) < self.limit:
            return None
        return max(1.0, failures[0] + self.window - time.monotonic())

    def failed(self, client: str) -> float:
        """Record a failure; return how long to wait before answering it."""
        failures = self._recent(client)
        failures.append(time.monotonic())
        self._failures[client] = failures
        if len(self._failures) > 100_000:  # a flood of addresses: forget the oldest
            with contextlib.suppress(StopIteration):
                self._failures.pop(next(iter(self._failures)))
        return min(self.base_delay * 2 ** (len(failures) - 1), self.max_delay)


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class AuthSettings:
    """How callers are authenticated (``create_app``'s ``auth``).

    ``tokens``: the tokens file (None: no tokens). ``proxy_header``: the header a trusted
    reverse proxy sets to the authenticated user's name (off unless named), taken only from
    requests coming from ``proxy_sources`` (the proxy's addresses; default loopback); the
    user gets the roles of the tokens file's entry of that name, else ``proxy_roles``.
    ``anonymous``: roles given to requests without credentials, from loopback clients
    only (off unless named)."""

    tokens: TokenFile | None = None
    proxy_header: str | None = None
    proxy_roles: frozenset[Role] = frozenset({Role.VIEWER})
    proxy_sources: frozenset[str] = frozenset({"127.0.0.1", "::1"})
    anonymous: frozenset[Role] | None = None
    throttle: LoginThrottle = field(default_factory=LoginThrottle)

    def proxy_identity(self, name: str) -> Identity:
        entry = self.tokens.named(name) if self.tokens is not None else None
        if entry is not None:
            return entry.identity(via="proxy")
        return Identity(name, self.proxy_roles, via="proxy")
