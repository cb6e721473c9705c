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
//
// Environment:
//   LEASEHOLD_URL  the sidecar's API (default http://127.0.0.1:4040)
//   STORE_URL      where writes are POSTed (default http://127.0.0.1:8080/write)
//   WORKER_NAME    sent as ?writer= (default: the host name, i.e. the pod name)
//
// Tokens are etcd revisions, far below 2^53, so a JS number holds them exactly.
'use strict';

const os = require('node:os');
const { setTimeout: sleep } = require('node:timers/promises');

const LEASEHOLD = (process.env.LEASEHOLD_URL || 'http://127.0.0.1:4040').replace(/\/+$/, '');
const STORE = process.env.STORE_URL || 'http://127.0.0.1:8080/write';
const NAME = process.env.WORKER_NAME || os.hostname();

const INTERVAL_MS = 50; // between writes
const MARGIN_MS = 2 * INTERVAL_MS; // never start a write with less validity left
const WATCH_WAIT = '60s'; // how long one blocking watch request may block

const log = (msg) => console.error(`${new Date().toISOString()} ${NAME}: ${msg}`);

// SIGTERM/SIGINT abort the watch and any sleep; the loops then return.
const stop = new AbortController();
for (const sig of ['SIGTERM', 'SIGINT']) {
  process.on(sig, () => {
    log(`${sig}: exiting`);
    stop.abort();
  });
}

// Blocks until this pod leads a term whose token is above `fenced`.
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
    if (status.leader && status.fencingToken > fenced) return status.fencingToken;
    index = status.index;
  }
}

// Writes every INTERVAL_MS while this pod leads. Returns undefined when
// leadership ended (or on SIGTERM), or the token the store rejected.
async function work() {
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
      const query = new URLSearchParams({ token: String(token), writer: NAME });
      const write = await fetch(`${STORE}?${query}`, {
        method: 'POST',
        body: `write ${n++}\n`,
        signal: AbortSignal.timeout(2000),
      });
      await write.arrayBuffer(); // read the answer so the connection is reused
      if (write.status === 409) {
        log(`store rejected token ${token}: a newer leader has written; stopping work`);
        return token;
      }
      if (write.status < 200 || write.status > 299) throw new Error(`store answered HTTP ${write.status}`);
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
      const token = await waitForLeadership(fenced);
      log(`leading with fencing token ${token}; starting work`);
      fenced = (await work()) ?? fenced;
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
