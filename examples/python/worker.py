#!/usr/bin/env python3
"""A worker that writes only while its leasehold sidecar says this pod leads.

Standard library only. The pattern (the same in every example):

  1. Block on the sidecar's watch until this pod leads: no busy polling.
  2. Before EACH write, ask GET /v1/token: 200 gives the fencing token and
     how long leadership is still valid; 503 means "not leader": stop.
  3. Attach the fencing token to every write, and let the store refuse a
     token smaller than one it has seen (HTTP 409): then a newer leader has
     written, so stop too, and wait for a newer term than the fenced one.
  4. Optionally (FENCED_CONFIGMAP) also keep a fenced ConfigMap, which the
     kube-apiserver itself fences with `leasehold fencing-policy`: labelled
     leasehold.io/fenced-by: <lease>, each write stamped with the annotation
     leasehold.io/fencing-token: "<token>". A 403 from the policy
     ("leasehold fencing rule ...") means the same as the store's 409.

Environment:
  LEASEHOLD_URL  the sidecar's API (default http://127.0.0.1:4040)
  STORE_URL      where writes are POSTed (default http://127.0.0.1:8080/write)
  WORKER_NAME    sent as ?writer= (default: the host name, i.e. the pod name)
  FENCED_CONFIGMAP  a ConfigMap in the Lease's namespace to server-side apply
                 after each write (default: none). It uses the pod's
                 ServiceAccount (KUBERNETES_SERVICE_HOST, _PORT and
                 SERVICEACCOUNT_DIR, default
                 /var/run/secrets/kubernetes.io/serviceaccount), which needs
                 create and patch on configmaps.
"""
import json
import os
import signal
import socket
import ssl
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

CONFIGMAP = os.environ.get("FENCED_CONFIGMAP", "")
SA_DIR = os.environ.get("SERVICEACCOUNT_DIR", "/var/run/secrets/kubernetes.io/serviceaccount")


def log(msg):
    print(f"{time.strftime('%H:%M:%S')} {NAME}: {msg}", file=sys.stderr, flush=True)


def request(method, url, timeout, data=None, headers=None, context=None):
    """Returns (HTTP status, body bytes); raises OSError when unreachable."""
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=context) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as err:  # 4xx and 5xx answers carry a body too
        return err.code, err.read()


def wait_for_leadership(fenced):
    """Blocks until this pod leads a term whose token is above `fenced`, and
    returns the sidecar's status (lease, namespace, fencingToken, ...).

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
            return status
        index = status["index"]


def fenced_write(status, token, n):
    """Server-side applies the ConfigMap CONFIGMAP, in the Lease's namespace,
    labelled as fenced by the Lease and stamped with token: one request that
    creates or updates it. Returns None when it landed, or the apiserver's
    message when the fencing policy refused it.
    """
    namespace, lease = status["namespace"], status["lease"]
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    if ":" in host:  # IPv6
        host = f"[{host}]"
    with open(os.path.join(SA_DIR, "token")) as f:  # re-read: the kubelet rotates it
        bearer = f.read().strip()
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": CONFIGMAP,
            "labels": {"leasehold.io/fenced-by": lease},
            "annotations": {"leasehold.io/fencing-token": str(token)},
        },
        "data": {"writer": NAME, "write": str(n)},
    }
    url = (f"https://{host}:{os.environ['KUBERNETES_SERVICE_PORT']}/api/v1/namespaces/{namespace}"
           f"/configmaps/{CONFIGMAP}?fieldManager=leasehold-example&force=true")
    code, answer = request("PATCH", url, timeout=5, data=json.dumps(body).encode(), headers={
        "Authorization": f"Bearer {bearer}",
        "Content-Type": "application/apply-patch+yaml",  # JSON is YAML
    }, context=ssl.create_default_context(cafile=os.path.join(SA_DIR, "ca.crt")))
    message = json.loads(answer).get("message", "") if answer else ""
    if code == 403 and "leasehold fencing" in message:
        return message
    if code // 100 != 2:
        raise RuntimeError(f"apiserver answered HTTP {code}: {message}")
    return None


def work(status):
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
        if CONFIGMAP:
            refusal = fenced_write(status, token, n)
            if refusal:
                log(f"apiserver refused token {token}: {refusal}; stopping work")
                return token
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
                status = wait_for_leadership(fenced)
                log(f"leading with fencing token {status['fencingToken']}; starting work")
                fenced = work(status) or fenced
            except (OSError, RuntimeError, ValueError, KeyError) as err:
                # Sidecar or store unreachable, or an answer we did not expect.
                log(f"error: {err}; retrying in 1s")
                time.sleep(1)
    except Stop as sig:
        log(f"{sig}: exiting")
    return 0


if __name__ == "__main__":
    sys.exit(main())
