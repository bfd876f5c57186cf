"""Identity and the attacks on it, against the app itself (its ASGI interface, each request
from the client address a test names): tokens kept hashed, failed logins slowed then
refused, anonymous access on loopback only, a proxy's header only from the proxy,
cross-site requests refused, the page's security headers."""

from __future__ import annotations

import json
import stat

import httpx
import pytest

from durable_agents.web import LoginThrottle, TokenFile, create_app
from tests.web.conftest import Served

pytestmark = pytest.mark.integration

SITE = "http://inbox.test"


def _http(app, address: str = "127.0.0.1", **headers: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(address, 50000))
    return httpx.AsyncClient(transport=transport, base_url=SITE, headers=headers)


@pytest.fixture
def tokens(tmp_path) -> tuple[TokenFile, str, str]:
    file = TokenFile(tmp_path / "tokens.json")
    return file, file.add("alice", ["approver"]), file.add("victor", ["viewer"])


def test_tokens_are_kept_hashed_and_readable_by_their_owner_only(tokens):
    file, alice, _ = tokens
    text = file.path.read_text()
    assert alice not in text and alice[3:] not in text
    assert stat.S_IMODE(file.path.stat().st_mode) == 0o600
    assert file.find(alice).name == "alice"
    assert file.find(alice[:-1] + ("A" if alice[-1] != "A" else "B")) is None
    assert file.revoke("alice") == 1 and file.find(alice) is None


async def test_failed_logins_are_slowed_then_refused_per_address(served: Served, tokens):
    file, alice, _ = tokens
    app = create_app(served.client, tokens=file, throttle=LoginThrottle(limit=3, window=600, base_delay=0.01))
    async with _http(app, "10.9.9.9") as attacker, _http(app, "10.9.9.8") as other:
        for _ in range(3):
            assert (await attacker.get("/api/me", headers={"Authorization": "Bearer da_guess"})).status_code == 401
        refused = await attacker.get("/api/me", headers={"Authorization": f"Bearer {alice}"})
        assert refused.status_code == 429, refused.text  # even a right token, until the window passes
        assert (await other.get("/api/me", headers={"Authorization": f"Bearer {alice}"})).json()["name"] == "alice"


async def test_without_credentials_nothing_is_answered(served: Served, tokens):
    app = create_app(served.client, tokens=tokens[0])
    async with _http(app) as http:
        for path in ("/api/me", "/api/approvals", "/api/sessions", "/api/sessions/x", "/api/sessions/x/events"):
            assert (await http.get(path)).status_code == 401, path


async def test_anonymous_access_only_when_asked_and_only_from_loopback(served: Served, tokens):
    app = create_app(served.client, tokens=tokens[0], anonymous=["viewer"])
    async with _http(app, "127.0.0.1") as local, _http(app, "192.0.2.7") as remote:
        me = (await local.get("/api/me")).json()
        assert me["via"] == "anonymous" and me["roles"] == ["viewer"]
        assert (await remote.get("/api/me")).status_code == 401
        relayed = await local.get("/api/me", headers={"X-Forwarded-For": "192.0.2.7"})
        assert relayed.status_code == 401  # a local proxy relaying someone else
    closed = create_app(served.client, tokens=tokens[0])
    async with _http(closed) as local:
        assert (await local.get("/api/me")).status_code == 401


async def test_a_proxys_identity_header_is_trusted_only_when_turned_on_and_from_the_proxy(served: Served, tokens):
    file, _, _ = tokens
    app = create_app(served.client, tokens=file, proxy_header="X-Forwarded-User", proxy_sources=["10.0.0.2"])
    async with _http(app, "10.0.0.2") as proxy, _http(app, "10.0.0.3") as direct:
        me = (await proxy.get("/api/me", headers={"X-Forwarded-User": "alice"})).json()
        assert (me["name"], me["roles"], me["via"]) == ("alice", ["approver"], "proxy")  # roles of alice's entry
        stranger = (await proxy.get("/api/me", headers={"X-Forwarded-User": "mallory"})).json()
        assert stranger["roles"] == ["viewer"]
        assert (await direct.get("/api/me", headers={"X-Forwarded-User": "alice"})).status_code == 401
    off = create_app(served.client, tokens=file)
    async with _http(off, "127.0.0.1") as local:
        assert (await local.get("/api/me", headers={"X-Forwarded-User": "alice"})).status_code == 401


async def test_browser_requests_that_change_state_need_the_csrf_token_and_this_sites_origin(served: Served, tokens):
    file, alice, _ = tokens
    app = create_app(served.client, tokens=file)
    async with _http(app) as browser:
        page = await browser.get("/")
        csrf = page.cookies["da_csrf"]
        login = await browser.post("/api/login", json={"token": alice}, headers={"X-CSRF-Token": csrf})
        assert login.status_code == 200, login.text
        cookie = login.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        body = {"approvalId": "a", "approved": True, "argumentsDigest": "sha256:00"}
        target = "/api/sessions/no-such/decision"
        assert (await browser.post(target, json=body)).status_code == 403  # no token header
        forged = await browser.post(target, json=body, headers={"X-CSRF-Token": "guess"})
        assert forged.status_code == 403
        other_site = {"X-CSRF-Token": csrf, "Origin": "http://evil.test"}
        assert (await browser.post(target, json=body, headers=other_site)).status_code == 403
        fetched = {"X-CSRF-Token": csrf, "Sec-Fetch-Site": "cross-site"}
        assert (await browser.post(target, json=body, headers=fetched)).status_code == 403
        same = await browser.post(target, json=body, headers={"X-CSRF-Token": csrf, "Origin": SITE})
        assert same.status_code == 404, same.text  # past the guard: there is no such session
    async with _http(app) as script:  # a bearer token is not sent by a browser on its own: no CSRF token needed
        bearer = await script.post(target, json=body, headers={"Authorization": f"Bearer {alice}"})
        assert bearer.status_code == 404, bearer.text


async def test_every_page_and_answer_carries_a_strict_content_security_policy(served: Served, tokens):
    app = create_app(served.client, tokens=tokens[0])
    async with _http(app) as http:
        for path in ("/", "/static/inbox.js", "/api/me", "/openapi.json"):
            got = await http.get(path)
            csp = got.headers["content-security-policy"]
            assert "script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
            assert got.headers["x-content-type-options"] == "nosniff"
        page = (await http.get("/")).text
        assert "<script>" not in page and "onload=" not in page  # no inline script in the page
        assert "http://" not in page and "https://" not in page  # nothing fetched from elsewhere
        spec = (await http.get("/openapi.json")).json()
        assert {"/api/approvals", "/api/sessions/{session_id}/decision", "/api/sessions/{session_id}/events"} <= set(
            spec["paths"]
        )
        json.dumps(spec)
