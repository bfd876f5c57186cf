"""Over-long session ids at the CLI: refused as one line naming the limit, exit 2."""

from __future__ import annotations

from tests.cli.conftest import one_line_error


def test_run_with_a_session_id_over_900_bytes_exits_2_naming_the_limit(cli):
    err = one_line_error(cli.inproc("run", "booker", "hi", "--session", "x" * 901), 2, "session id of 901 bytes")
    assert "limited to 900 bytes" in err and "1,000-byte limit" in err
