#!/usr/bin/env python3
"""A sharded worker: it works only on the shards its leasehold sidecar holds.

Standard library only. The sidecar runs with a lease group, for example
LEASEHOLD_LEASE_NAME=orders and LEASEHOLD_SHARDS=8: it holds some of the
Leases orders-0 ... orders-7, a fair share of them, and the other replicas
hold the rest. The pattern is the single-Lease one (worker.py), per shard:

  1. Watch GET /v1/leases (a blocking query with ?index=) to learn which
     shards this pod holds: a shard is held while its element says
     "leader": true. No busy polling.
  2. For each shard held, a thread writes that shard's work. Before EACH
     write it asks GET /v1/leases/<shard>/token: 200 gives the shard's
     fencing token and validity; 503 means this pod no longer holds the
     shard: the thread stops.
  3. Every write carries its shard's token, and the store refuses a token
     smaller than one it has seen for that shard (HTTP 409): the thread
     stops, and the shard is worked on again only under a newer term.

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
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

LEASEHOLD = os.environ.get("LEASEHOLD_URL", "http://127.0.0.1:4040").rstrip("/")
STORE = os.environ.get("STORE_URL", "http://127.0.0.1:8080/write")
NAME = os.environ.get("WORKER_NAME") or socket.gethostname()

INTERVAL = 0.05  # seconds between writes of one shard
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


class Shard(threading.Thread):
    """Writes one shard's work while this pod holds the shard's Lease."""

    def __init__(self, lease, token, stopping, fenced):
        super().__init__(name=lease, daemon=True)
        self.lease, self.token, self.stopping, self.fenced = lease, token, stopping, fenced

    def run(self):
        n = 0
        quoted = urllib.parse.quote(self.lease, safe="")
        while not self.stopping.is_set():
            # Ask before every write; never cache the answer.
            code, body = request("GET", f"{LEASEHOLD}/v1/leases/{quoted}/token", timeout=2)
            if code == 503:
                log(f"{self.lease}: no longer held; stopping its work")
                return
            if code != 200:
                log(f"{self.lease}: token check answered HTTP {code}; stopping its work")
                return
            lease = json.loads(body)
            token = lease["fencingToken"]
            if lease["validForMs"] < MARGIN_MS:
                time.sleep(INTERVAL)  # too close to the end of the term: check again
                continue
            n += 1
            query = urllib.parse.urlencode({"shard": self.lease, "token": token, "writer": NAME})
            code, _ = request("POST", f"{STORE}?{query}", timeout=2, data=f"{self.lease} write {n}\n".encode())
            if code == 409:
                log(f"{self.lease}: store rejected token {token}: a newer holder has written; stopping its work")
                self.fenced[self.lease] = max(self.fenced.get(self.lease, 0), token)
                return
            if code // 100 != 2:
                log(f"{self.lease}: store answered HTTP {code}; stopping its work")
                return
            time.sleep(INTERVAL)


def held_shards(leases):
    """The shards this pod leads now, with their tokens."""
    return {s["lease"]: s["fencingToken"] for s in leases["leases"] if s["leader"]}


class Stop(Exception):
    """Raised by the signal handler: interrupts even a blocking request."""


def on_signal(signum, _frame):
    raise Stop(signal.Signals(signum).name)


def main():
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    stopping = threading.Event()
    fenced = {}  # shard -> the largest token the store refused: never work under it again
    threads = {}  # shard -> its running Shard thread
    index = None
    try:
        while True:
            url = f"{LEASEHOLD}/v1/leases?wait={WATCH_WAIT}"
            if index is not None:
                url += f"&index={index}"
            try:
                code, body = request("GET", url, timeout=90)
            except OSError as err:
                log(f"sidecar unreachable ({err}); retrying in 1s")
                time.sleep(1)
                continue
            if code != 200:
                log(f"watch answered HTTP {code}; retrying in 1s")
                time.sleep(1)
                continue
            leases = json.loads(body)
            if index is not None and leases["index"] < index:
                index = None  # the sidecar restarted: start over (a return promises no change)
                continue
            index = leases["index"]
            for lease, token in held_shards(leases).items():
                running = threads.get(lease)
                if (running is None or not running.is_alive()) and token > fenced.get(lease, 0):
                    log(f"{lease}: held with token {token}; working on it")
                    threads[lease] = Shard(lease, token, stopping, fenced)
                    threads[lease].start()
    except Stop as stop:
        log(f"{stop}: exiting")
        stopping.set()
        for t in threads.values():
            t.join(timeout=5)
        return 0


if __name__ == "__main__":
    sys.exit(main())
