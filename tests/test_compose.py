"""docker-compose.temporal.yml: a PostgreSQL-backed Temporal with UI, admin tools and
the search attributes the embedded dev server registers (parsed, not run)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from durable_agents.devserver import SEARCH_ATTRIBUTES

COMPOSE = Path(__file__).resolve().parents[1] / "docker-compose.temporal.yml"


@pytest.fixture(scope="module")
def services() -> dict:
    doc = yaml.safe_load(COMPOSE.read_text())
    return doc["services"]


def env(service: dict) -> dict[str, str]:
    raw = service.get("environment") or {}
    if isinstance(raw, list):
        raw = dict(item.split("=", 1) for item in raw)
    return {k: str(v) for k, v in raw.items()}


def depends(service: dict) -> dict:
    raw = service.get("depends_on") or {}
    return {name: {} for name in raw} if isinstance(raw, list) else raw


def host_ports(service: dict) -> set[str]:
    return {str(p).split(":")[-2] if ":" in str(p) else str(p) for p in service.get("ports", [])}


def script(service: dict) -> str:
    cmd = service.get("command", "")
    return "\n".join(cmd) if isinstance(cmd, list) else str(cmd)


def test_services_and_images(services):
    for name in ("postgresql", "temporal", "temporal-admin-tools", "temporal-ui"):
        assert name in services, name
    assert services["postgresql"]["image"].startswith("postgres:")
    assert services["temporal"]["image"].startswith("temporalio/")
    assert services["temporal-admin-tools"]["image"].startswith("temporalio/admin-tools:")
    assert services["temporal-ui"]["image"].startswith("temporalio/ui:")


def test_postgres_has_volume_and_healthcheck(services):
    pg = services["postgresql"]
    assert any("/var/lib/postgresql/data" in str(v) for v in pg["volumes"])
    assert "pg_isready" in str(pg["healthcheck"]["test"])
    assert "5432" in host_ports(pg)


def test_server_uses_postgres_and_waits_for_it(services):
    server = services["temporal"]
    e = env(server)
    assert e["DB"] == "postgres12"
    assert e["POSTGRES_SEEDS"] == "postgresql"
    assert e["DB_PORT"] == "5432"
    assert e["POSTGRES_USER"] and e["POSTGRES_PWD"]
    deps = depends(server)
    assert deps["postgresql"]["condition"] == "service_healthy"
    assert "7233" in host_ports(server)
    # the schema is set up before the server starts
    assert deps["temporal-admin-tools"]["condition"] == "service_completed_successfully"
    assert "temporal-sql-tool" in script(services["temporal-admin-tools"])


def test_ui_points_at_server(services):
    ui = services["temporal-ui"]
    assert env(ui)["TEMPORAL_ADDRESS"] == "temporal:7233"
    assert "TEMPORAL_CORS_ORIGINS" in env(ui)
    assert "8080" in host_ports(ui)
    assert "temporal" in depends(ui)


def test_ui_decrypts_through_a_codec_endpoint_when_given(services):
    ui_env = env(services["temporal-ui"])
    assert ui_env["TEMPORAL_CODEC_ENDPOINT"] == "${TEMPORAL_CODEC_ENDPOINT:-}"  # off unless set
    assert "durable-agents codec-server --ui-origin http://localhost:8080" in COMPOSE.read_text()


def test_search_attributes_match_the_dev_server(services):
    setup = [s for s in services.values() if "search-attribute create" in script(s)]
    assert len(setup) == 1, "exactly one service registers the search attributes"
    svc = setup[0]
    assert svc["image"].startswith("temporalio/admin-tools:")
    assert depends(svc)["temporal"]["condition"] == "service_healthy"
    text = script(svc)
    created = dict(re.findall(r"search-attribute create\b[^\n]*?--name\s+(\w+)\s+--type\s+(\w+)", text))
    assert created == SEARCH_ATTRIBUTES
    assert re.search(r"--namespace\s+default", text)


def test_worker_versioning_on_as_in_the_embedded_server():
    from durable_agents.devserver import DYNAMIC_CONFIG

    doc = yaml.safe_load(COMPOSE.read_text())
    dynamic = yaml.safe_load(doc["configs"]["temporal-dynamicconfig"]["content"])
    for key in ("frontend.workerVersioningWorkflowAPIs", "system.enableDeploymentVersions"):
        assert DYNAMIC_CONFIG[key] is True, key
        assert dynamic[key] == [{"value": True, "constraints": {}}], key


def test_timers_fire_on_time_as_in_the_embedded_server():
    from durable_agents.devserver import DYNAMIC_CONFIG

    doc = yaml.safe_load(COMPOSE.read_text())
    dynamic = yaml.safe_load(doc["configs"]["temporal-dynamicconfig"]["content"])
    key = "history.timerProcessorMaxTimeShift"
    assert dynamic[key] == [{"value": DYNAMIC_CONFIG[key], "constraints": {}}]


def test_an_opentelemetry_collector_takes_the_workers_traces(services):
    """`durable-agents worker --otlp-endpoint http://localhost:4318` reaches it (OTLP/HTTP; gRPC on 4317)."""
    collector = services["otel-collector"]
    assert collector["image"].startswith("otel/opentelemetry-collector")
    assert {"4317", "4318"} <= host_ports(collector)
    [mounted] = collector["configs"]
    assert collector["command"] == [f"--config={mounted['target']}"]
    doc = yaml.safe_load(COMPOSE.read_text())
    config = yaml.safe_load(doc["configs"][mounted["source"]]["content"])
    protocols = config["receivers"]["otlp"]["protocols"]
    assert protocols["http"]["endpoint"] == "0.0.0.0:4318" and protocols["grpc"]["endpoint"] == "0.0.0.0:4317"
    traces = config["service"]["pipelines"]["traces"]
    assert traces["receivers"] == ["otlp"]
    assert set(traces["exporters"]) <= set(config["exporters"]) and set(traces["processors"]) <= set(
        config["processors"]
    )
    assert "--otlp-endpoint http://localhost:4318" in COMPOSE.read_text()


def test_a_codec_server_for_the_ui_runs_with_the_encryption_profile(services):
    codec = services["codec-server"]
    assert codec["profiles"] == ["encryption"]  # it needs keys: not started by a plain `up`
    assert codec["image"].startswith("python:")
    assert ".:/src:ro" in codec["volumes"]
    run = script(codec)
    assert "pip install --quiet --no-cache-dir /src" in run
    assert "--encryption-key-file /run/secrets/encryption-keys" in run
    assert "codec-server --host 0.0.0.0 --port 8081 --ui-origin http://localhost:8080" in run
    assert "8081" in host_ports(codec)
    assert codec["secrets"] == ["encryption-keys"]
    top = yaml.safe_load(COMPOSE.read_text())
    assert "DURABLE_AGENTS_ENCRYPTION_KEY_FILE" in top["secrets"]["encryption-keys"]["file"]
    # the UI's codec endpoint is the address the browser reaches the container at
    assert "TEMPORAL_CODEC_ENDPOINT=http://localhost:8081" in COMPOSE.read_text()
