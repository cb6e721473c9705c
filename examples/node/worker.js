#!/usr/bin/env node
// A worker that writes only while its leasehold sidecar says this pod leads.
//
// Node.js 18 or later, no npm packages: the built-in fetch only. The pattern
// (the same in every example):
//
//   1. Block on the sidecar's watch until this pod leads: no busy polling.
//   2. Before EACH write, ask GET /v1/token: 200 gives the fencing token and
//      how long leadership is still valid; 503 means "not leader": stop.
//   3. Attach the fencing token to every write, and let the store refuse a
//      token smaller than one it has seen (HTTP 409): then a newer leader has
//      written, so stop too, and wait for a newer term than the fenced one.
//   4. Optionally (FENCED_CONFIGMAP) also keep a fenced ConfigMap, which the
//      kube-apiserver itself fences with `leasehold fencing-policy`: labelled
//      leasehold.io/fenced-by: <lease>, each write stamped with the annotation
//      leasehold.io/fencing-token: "<token>". A 403 from the policy
//      ("leasehold fencing rule ...") means the same as the store's 409.
//
// Environment:
//   LEASEHOLD_URL  the sidecar's API (default http://127.0.0.1:4040)
//   STORE_URL      where writes are POSTed (default http://127.0.0.1:8080/write)
//   WORKER_NAME    sent as ?writer= (default: the host name, i.e. the pod name)
//   FENCED_CONFIGMAP  a ConfigMap in the Lease's namespace to server-side apply
//                  after each write (default: none), as the pod's
//                  ServiceAccount (KUBERNETES_SERVICE_HOST, _PORT and
//                  SERVICEACCOUNT_DIR, default
//                  /var/run/secrets/kubernetes.io/serviceaccount), which
//                  needs create and patch on configmaps.
//
// Tokens are etcd revisions, far below 2^53, so a JS number holds them exactly.
'use strict';

const fs = require('node:fs');
const https = require('node:https');
const os = require('node:os');
const path = require('node:path');
const { setTimeout: sleep } = require('node:timers/promises');

const LEASEHOLD = (process.env.LEASEHOLD_URL || 'http://127.0.0.1:4040').replace(/\/+$/, '');
const STORE = process.env.STORE_URL || 'http://127.0.0.1:8080/write';
const NAME = process.env.WORKER_NAME || os.hostname();

const INTERVAL_MS = 50; // between writes
const MARGIN_MS = 2 * INTERVAL_MS; // never start a write with less validity left
const WATCH_WAIT = '60s'; // how long one blocking watch request may block

const CONFIGMAP = process.env.FENCED_CONFIGMAP || '';
const SA_DIR = process.env.SERVICEACCOUNT_DIR || '/var/run/secrets/kubernetes.io/serviceaccount';

const log = (msg) => console.error(`${new Date().toISOString()} ${NAME}: ${msg}`);

// SIGTERM/SIGINT abort the watch and any sleep; the loops then return.
const stop = new AbortController();
for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => {
    log(`${sig}: exiting`);
    stop.abort();
  });
}

// Blocks until this pod leads a term whose token is above `fenced`, and
// returns the sidecar's status (lease, namespace, fencingToken, ...).
// GET /v1/watch answers at once without `index` (or when the state has moved
// on), and otherwise blocks until the state changes: a blocking query, not a
// poll. A return does not promise a change: read the body.
async function waitForLeadership(fenced) {
  let index;
  for (;;) {
    const query = index === undefined ? '' : `&index=${index}`;
    const res = await fetch(`${LEASEHOLD}/v1/watch?wait=${WATCH_WAIT}${query}`, { signal: stop.signal });
    if (res.status !== 200) throw new Error(`watch answered HTTP ${res.status}`);
    const status = await res.json();
    if (status.leader && status.fencingToken > fenced) return status;
    index = status.index;
  }
}

// Server-side applies the ConfigMap CONFIGMAP, in the Lease's namespace,
// labelled as fenced by the Lease and stamped with token: one request that
// creates or updates it. Resolves to undefined when it landed, or to the
// apiserver's message when the fencing policy refused it. (The built-in
// fetch cannot trust a CA of our choosing; node:https can.)
function fencedWrite({ namespace, lease }, token, n) {
  const body = JSON.stringify({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: CONFIGMAP,
      labels: { 'leasehold.io/fenced-by': lease },
      annotations: { 'leasehold.io/fencing-token': String(token) },
    },
    data: { writer: NAME, write: String(n) },
  });
  const options = {
    method: 'PATCH',
    host: process.env.KUBERNETES_SERVICE_HOST,
    port: process.env.KUBERNETES_SERVICE_PORT,
    path: `/api/v1/namespaces/${namespace}/configmaps/${CONFIGMAP}?fieldManager=leasehold-example&force=true`,
    ca: fs.readFileSync(path.join(SA_DIR, 'ca.crt')),
    headers: {
      // Re-read for every write: the kubelet rotates the token.
      Authorization: `Bearer ${fs.readFileSync(path.join(SA_DIR, 'token'), 'utf8').trim()}`,
      'Content-Type': 'application/apply-patch+yaml', // JSON is YAML
    },
    timeout: 5000,
    signal: stop.signal, // SIGTERM ends it too
  };
  return new Promise((resolve, reject) => {
    const req = https.request(options, (res) => {
      let answer = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (answer += chunk));
      res.on('end', () => {
        let message = answer;
        try {
          message = JSON.parse(answer).message || '';
        } catch {} // not a Status: keep the text
        if (res.statusCode === 403 && message.includes('leasehold fencing')) resolve(message);
        else if (res.statusCode >= 200 && res.statusCode <= 299) resolve(undefined);
        else reject(new Error(`apiserver answered HTTP ${res.statusCode}: ${message}`));
      });
    });
    req.on('timeout', () => req.destroy(new Error('apiserver: no answer within 5s')));
    req.on('error', reject);
    req.end(body);
  });
}

// Writes every INTERVAL_MS while this pod leads. Returns undefined when
// leadership ended (or on SIGTERM), or the token the store (or the
// apiserver) rejected.
async function work(status) {
  for (let n = 1; !stop.signal.aborted; ) {
    // Rule 1: ask before every write; never cache the answer.
    const res = await fetch(`${LEASEHOLD}/v1/token`, { signal: AbortSignal.timeout(2000) });
    const body = await res.text();
    if (res.status === 503) {
      log('leadership lost; stopping work');
      return undefined;
    }
    if (res.status !== 200) throw new Error(`token check answered HTTP ${res.status}`);
    const { fencingToken: token, validForMs } = JSON.parse(body);

    if (validForMs >= MARGIN_MS) {
      // Rule 2: the token travels with the write; the store checks it.
      // (Too close to the end of the term, we skip the write: the sidecar
      // renews every retry period, so check again at the next tick.)
      const number = n++;
      const query = new URLSearchParams({ token: String(token), writer: NAME });
      const write = await fetch(`${STORE}?${query}`, {
        method: 'POST',
        body: `write ${number}\n`,
        signal: AbortSignal.timeout(2000),
      });
      await write.arrayBuffer(); // read the answer so the connection is reused
      if (write.status === 409) {
        log(`store rejected token ${token}: a newer leader has written; stopping work`);
        return token;
      }
      if (write.status < 200 || write.status > 299) throw new Error(`store answered HTTP ${write.status}`);
      if (CONFIGMAP) {
        const refusal = await fencedWrite(status, token, number);
        if (refusal) {
          log(`apiserver refused token ${token}: ${refusal}; stopping work`);
          return token;
        }
      }
    }
    await sleep(INTERVAL_MS, undefined, { signal: stop.signal });
  }
  return undefined;
}

async function main() {
  let fenced = 0; // the largest token the store has refused: never lead with it again
  while (!stop.signal.aborted) {
    try {
      log('waiting for leadership');
      const status = await waitForLeadership(fenced);
      log(`leading with fencing token ${status.fencingToken}; starting work`);
      fenced = (await work(status)) ?? fenced;
    } catch (err) {
      if (stop.signal.aborted) break; // the abort we asked for
      // Sidecar or store unreachable, or an answer we did not expect.
      log(`error: ${err.cause?.message ?? err.message}; retrying in 1s`);
      await sleep(1000, undefined, { signal: stop.signal }).catch(() => {});
    }
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
