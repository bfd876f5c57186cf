"""A webhook receiver for `durable-agents web --webhook URL`: checks each request's signature
and age, drops a duplicate by its event id, and tells a chat channel (any Slack-compatible
"incoming webhook" URL in $CHAT_WEBHOOK_URL) or, without one, prints the message.

Standard library only: run it where your chat tools are, without durable-agents installed.

    WEBHOOK_SECRET=… CHAT_WEBHOOK_URL=https://hooks.example/T000/B000/XXX \
        python examples/webhook_receiver/receiver.py --port 8400
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import sqlite3
import sys
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOLERANCE_SECONDS = 300  # refuse a signed request older (or newer) than this: a replay


def signature_ok(secret: str, timestamp: str, body: bytes, given: str) -> bool:
    try:
        sent_at = int(timestamp)
    except ValueError:
        return False
    if abs(time.time() - sent_at) > TOLERANCE_SECONDS:
        return False
    expected = "v1=" + hmac.new(secret.encode(), f"{sent_at}.".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), given.encode())


def message_of(event: dict) -> str:
    data = event.get("data", {})
    where = f"{data.get('agent')} / session {data.get('sessionId')}"
    if event["type"] == "approval.requested":
        return f"approval.requested: {where} waits for a decision (approval {data.get('approvalId')})"
    if event["type"] == "run.finished":
        return f"run.finished: {where} ({data.get('finishReason')})"
    return f"run.failed: {where}: {data.get('error', {}).get('message', data.get('error'))}"


class Receiver(BaseHTTPRequestHandler):
    secret: str = ""
    seen: sqlite3.Connection
    chat_url: str | None = None

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not signature_ok(
            self.secret, self.headers.get("Webhook-Timestamp", ""), body, self.headers.get("Webhook-Signature", "")
        ):
            return self._answer(401)
        event = json.loads(body)
        with self.seen:  # one row per event id: a retried delivery is answered, not told twice
            fresh = self.seen.execute("INSERT OR IGNORE INTO seen (id) VALUES (?)", (event["id"],)).rowcount == 1
        if fresh:
            text = message_of(event)
            if self.chat_url:
                post = urllib.request.Request(
                    self.chat_url, json.dumps({"text": text}).encode(), {"Content-Type": "application/json"}
                )
                urllib.request.urlopen(post, timeout=10).close()  # a failure answers 500: the sender retries
            else:
                print(text, flush=True)
        self._answer(204)

    def _answer(self, status: int) -> None:
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:  # quiet: the messages are the output
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8400)
    parser.add_argument("--seen-db", default="webhook-receiver.db", help="where delivered event ids are kept")
    args = parser.parse_args()
    Receiver.secret = os.environ.get("WEBHOOK_SECRET", "")
    if not Receiver.secret:
        sys.exit("set WEBHOOK_SECRET (the secret given to durable-agents web)")
    Receiver.chat_url = os.environ.get("CHAT_WEBHOOK_URL") or None
    Receiver.seen = sqlite3.connect(args.seen_db, check_same_thread=False)
    Receiver.seen.execute("CREATE TABLE IF NOT EXISTS seen (id TEXT PRIMARY KEY)")
    server = ThreadingHTTPServer((args.host, args.port), Receiver)
    print(f"listening on http://{args.host}:{server.server_address[1]}/", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
