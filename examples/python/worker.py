#!/usr/bin/env python3
"""A worker that writes only while its leasehold sidecar says this pod leads.

Standard library only. The pattern (the same in every example):

  1. Block on the sidecar's watch until this pod leads: no busy polling.
  2. Before EACH write, ask GET /v1/token: 200 gives the fencing token and
     how long leadership is still valid; 503 means "not leader": stop.
  3. Attach the fencing token to every write, and let the store refuse a
     token smaller than one it has seen (HTTP 409): then a newer leader has
     written, so stop too, and wait for a newer term than the fenced one.

Environment:
  LEASEHOLD_URL  the sidecar's API (default http://127.0.0.1:4040)
  STORE_URL      where writes are POSTed (default http://127.0.0.1:8080/write)
  WORKER_NAME    sent as ?writer= (default: the host name, i.e. the pod name)
"""
import json
import os
import signal
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

LEASEHOLD = os.environ.get("LEASEHOLD_URL", "http://127.0.0.1:4040").rstrip("/")
STORE = os.environ.get("STORE_URL", "http://127.0.0.1:8080/write")
NAME = os.environ.get("WORKER_NAME") or socket.gethostname()

INTERVAL = 0.05  # seconds between writes
MARGIN_MS = 2 * INTERVAL * 1000  # never start a write with less validity left
WATCH_WAIT = "60s"  # how long one blocking watch request may block


def log(msg):
    print(f"{time.strftime('%H:%M:%S')} {NAME}: {msg}", file=sys.stderr, flush=True)


def request(method, url, timeout, data=None):
    """Returns (HTTP status, body bytes); raises OSError when unreachable."""
    req = urllib.request.Request(url, data=data, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:  # 4xx and 5xx answers carry a body too
        return err.code, err.read()


def wait_for_leadership(fenced):
    """Blocks until this pod leads a term whose token is above `fenced`.

    GET /v1/watch answers at once without `index` (or when the state has
    moved on), and otherwise blocks until the state changes: a blocking
    query, not a poll. A return does not promise a change: read the body.
    """
    index = None
    while True:
        url = f"{LEASEHOLD}/v1/watch?wait={WATCH_WAIT}"
        if index is not None:
            url += f"&index={index}"
        code, body = request("GET", url, timeout=90)
        if code != 200:
            raise RuntimeError(f"watch answered HTTP {code}")
        status = json.loads(body)
        if status["leader"] and status["fencingToken"] > fenced:
            return status["fencingToken"]
        index = status["index"]


def work():
    """Writes every INTERVAL while this pod leads.

    Returns None when leadership ended, or the token the store rejected.
    """
    n = 0
    while True:
        # Rule 1: ask before every write; never cache the answer.
        code, body = request("GET", f"{LEASEHOLD}/v1/token", timeout=2)
        if code == 503:
            log("leadership lost; stopping work")
            return None
        if code != 200:
            raise RuntimeError(f"token check answered HTTP {code}")
        lease = json.loads(body)
        token = lease["fencingToken"]
        if lease["validForMs"] < MARGIN_MS:
            # Too close to the end of the term to start a write. The sidecar
            # renews every retry period; check again at the next tick.
            time.sleep(INTERVAL)
            continue

        # Rule 2: the token travels with the write; the store checks it.
        n += 1
        query = urllib.parse.urlencode({"token": token, "writer": NAME})
        code, _ = request("POST", f"{STORE}?{query}", timeout=2, data=f"write {n}\n".encode())
        if code == 409:
            log(f"store rejected token {token}: a newer leader has written; stopping work")
            return token
        if code // 100 != 2:
            raise RuntimeError(f"store answered HTTP {code}")
        time.sleep(INTERVAL)


class Stop(Exception):
    """Raised by the signal handler: interrupts even a blocking request."""


def on_signal(signum, _frame):
    raise Stop(signal.Signals(signum).name)


def main():
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    fenced = 0  # the largest token the store has refused: never lead with it again
    try:
        while True:
            try:
                log("waiting for leadership")
                token = wait_for_leadership(fenced)
                log(f"leading with fencing token {token}; starting work")
                fenced = work() or fenced
            except (OSError, RuntimeError, ValueError, KeyError) as err:
                # Sidecar or store unreachable, or an answer we did not expect.
                log(f"error: {err}; retrying in 1s")
                time.sleep(1)
    except Stop as sig:
        log(f"{sig}: exiting")
    return 0


if __name__ == "__main__":
    sys.exit(main())
