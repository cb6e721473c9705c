#!/usr/bin/env python3
"""A small replicated key-value worker whose rank is its replication position.

Standard library only. Run one per pod beside a leasehold sidecar with
LEASEHOLD_APP_RANK_URL=http://127.0.0.1:8090/rank (data-aware failover):

  * The primary (the pod whose sidecar leads) accepts PUT /kv/<key> on
    :8090, appends each write to its log and numbers it: the number is
    the Operation ID, the log's generation the History ID.
  * Replicas pull the primary's log (GET /log?after=N from the leader's
    address, LEASEHOLD_ADVERTISE_ADDRESS pointing at :8090) and apply it
    in order: their position is the last Operation ID they applied, their
    generation the primary's.
  * GET /rank answers {"generation": <History ID>, "position": <Operation
    ID>}: the sidecar publishes it, and on a failover the replica of the
    last primary's generation with the highest position takes over: the
    one that has the data.
  * A replica promoted to primary starts a new generation (a new History
    ID, as the design notes' primary does), so a replica still of the old
    one is behind it by definition, and one that missed writes of the old
    primary is never promoted over one that has them.

Environment:
  LEASEHOLD_URL  the sidecar's API (default http://127.0.0.1:4040)
  KV_ADDR        where the worker listens (default 127.0.0.1:8090; the
                 sidecar's advertised address must reach it for replicas)
"""
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LEASEHOLD = os.environ.get("LEASEHOLD_URL", "http://127.0.0.1:4040").rstrip("/")
ADDR = os.environ.get("KV_ADDR", "127.0.0.1:8090")

lock = threading.Lock()
state = {"generation": "", "log": [], "data": {}}  # log: [(op_id, key, value)]


def position():
    return state["log"][-1][0] if state["log"] else 0


def get_json(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.load(r)


def leader_status():
    try:
        return get_json(LEASEHOLD + "/v1/status")
    except (urllib.error.URLError, OSError, ValueError):
        return None


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        with lock:
            if self.path == "/rank":
                return self.answer(200, {"generation": state["generation"], "position": position()})
            if self.path.startswith("/log?after="):
                after = int(self.path.split("=", 1)[1])
                return self.answer(200, {"generation": state["generation"],
                                         "log": [e for e in state["log"] if e[0] > after]})
            if self.path.startswith("/kv/"):
                key = self.path[4:]
                if key in state["data"]:
                    return self.answer(200, {"value": state["data"][key]})
                return self.answer(404, {"error": "no such key"})
        self.answer(404, {"error": "not found"})

    def do_PUT(self):
        st = leader_status()
        if not st or not st.get("leader"):
            return self.answer(503, {"error": "not the primary"})
        value = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
        with lock:
            op = position() + 1
            state["log"].append((op, self.path[4:], value))
            state["data"][self.path[4:]] = value
        self.answer(200, {"position": op, "fencingToken": st["fencingToken"]})


def replicate():
    """Follow the primary while not leading; start a generation on promotion."""
    leading = False
    while True:
        st = leader_status()
        if st and st.get("leader") and not leading:
            with lock:
                state["generation"] = uuid.uuid4().hex[:12]  # a new History ID
                # Renumbering is not needed: positions keep growing.
            leading = True
            print(f"primary of generation {state['generation']} at position {position()}", file=sys.stderr, flush=True)
        elif st and not st.get("leader"):
            leading = False
            address = st.get("leaderAddress")
            if address:
                try:
                    got = get_json(f"http://{address}/log?after={position()}", timeout=2)
                    with lock:
                        if got["generation"] != state["generation"]:
                            # A new primary: its history continues ours only
                            # if it had what we have; this worker trusts the
                            # sidecar's choice, which ranks by the data.
                            state["generation"] = got["generation"]
                        for op, key, value in got["log"]:
                            if op == position() + 1:
                                state["log"].append((op, key, value))
                                state["data"][key] = value
                except (urllib.error.URLError, OSError, ValueError, KeyError):
                    pass
        time.sleep(0.2)


if __name__ == "__main__":
    host, port = ADDR.rsplit(":", 1)
    threading.Thread(target=replicate, daemon=True).start()
    ThreadingHTTPServer((host, int(port)), Handler).serve_forever()
