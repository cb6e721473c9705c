#!/bin/sh
# A worker that writes only while its leasehold sidecar says this pod leads.
#
# POSIX sh and curl only (no jq: sed picks the few JSON fields needed). The
# pattern (the same in every example):
#
#   1. Block on the sidecar's watch until this pod leads: no busy polling.
#   2. Before EACH write, ask GET /v1/token: 200 gives the fencing token and
#      how long leadership is still valid; 503 means "not leader": stop.
#   3. Attach the fencing token to every write, and let the store refuse a
#      token smaller than one it has seen (HTTP 409): then a newer leader has
#      written, so stop too, and wait for a newer term than the fenced one.
#   4. Optionally (FENCED_CONFIGMAP) also keep a fenced ConfigMap, which the
#      kube-apiserver itself fences with `leasehold fencing-policy`: labelled
#      leasehold.io/fenced-by: <lease>, each write stamped with the annotation
#      leasehold.io/fencing-token: "<token>". A refusal by the policy
#      ("leasehold fencing rule ...") means the same as the store's 409.
#
# Environment:
#   LEASEHOLD_URL  the sidecar's API (default http://127.0.0.1:4040)
#   STORE_URL      where writes are POSTed (default http://127.0.0.1:8080/write)
#   WORKER_NAME    sent as ?writer= (default: the host name); keep it URL-safe
#   FENCED_CONFIGMAP  a ConfigMap in the Lease's namespace to server-side apply
#                  with kubectl after each write (default: none); kubectl uses
#                  the pod's ServiceAccount (or $KUBECONFIG), which needs
#                  create and patch on configmaps
set -u

LEASEHOLD_URL=${LEASEHOLD_URL:-http://127.0.0.1:4040}
STORE_URL=${STORE_URL:-http://127.0.0.1:8080/write}
WORKER_NAME=${WORKER_NAME:-$(hostname)}
INTERVAL=0.05 # seconds between writes (sleep takes fractions in GNU and busybox)
MARGIN_MS=100 # never start a write with less validity left (2 x INTERVAL)
WATCH_WAIT=60s # how long one blocking watch request may block
FENCED_CONFIGMAP=${FENCED_CONFIGMAP:-}

log() { echo "$(date +%T) $WORKER_NAME: $*" >&2; }

tmp=$(mktemp -d) || exit 1
child=
stop() {
	[ -n "$child" ] && kill "$child" 2>/dev/null
	rm -rf "$tmp"
	log "$1: exiting"
	exit 0
}
trap 'stop SIGTERM' TERM
trap 'stop SIGINT' INT

# http METHOD URL [curl options...] sets $code (000 when unreachable) and $body.
# curl runs in the background while the shell waits for it: a shell runs its
# traps only between commands, and `wait` is the one command that a signal
# interrupts, so SIGTERM is honoured at once even during a long watch.
http() {
	method=$1 url=$2
	shift 2
	: >"$tmp/body"
	curl -sS -X "$method" -o "$tmp/body" -w '%{http_code}' "$@" "$url" >"$tmp/code" &
	child=$!
	wait "$child"
	child=
	code=$(cat "$tmp/code") body=$(cat "$tmp/body")
}

# nap SECONDS sleeps, interruptibly (see http).
nap() {
	sleep "$1" &
	child=$!
	wait "$child"
	child=
}

# field NAME prints the number NAME holds in $body (compact JSON, as served).
field() { printf '%s' "$body" | sed -n "s/.*\"$1\":\([0-9][0-9]*\).*/\1/p"; }

# text NAME prints the string NAME holds in $body (one without quotes in it).
text() { printf '%s' "$body" | sed -n "s/.*\"$1\":\"\([^\"]*\)\".*/\1/p"; }

# fenced_write N server-side applies $FENCED_CONFIGMAP in the Lease's
# namespace, labelled as fenced by the Lease and stamped with $token: one
# request that creates or updates it. It returns 0 when the write landed, 1
# when the fencing policy refused it (the reason in $refusal), 2 on any
# other failure. kubectl runs in the background, as curl does in http.
fenced_write() {
	cat >"$tmp/configmap.yaml" <<EOF
apiVersion: v1
kind: ConfigMap
metadata:
  name: "$FENCED_CONFIGMAP"
  namespace: "$namespace"
  labels: {leasehold.io/fenced-by: "$lease"}
  annotations: {leasehold.io/fencing-token: "$token"}
data: {writer: "$WORKER_NAME", write: "$1"}
EOF
	kubectl apply --server-side --force-conflicts --field-manager=leasehold-example \
		--request-timeout=5s -f "$tmp/configmap.yaml" >"$tmp/kubectl" 2>&1 &
	child=$!
	wait "$child" && child= && return 0
	child=
	refusal=$(grep -o 'leasehold fencing rule.*' "$tmp/kubectl") && return 1
	log "kubectl apply failed: $(cat "$tmp/kubectl")"
	return 2
}

# wait_for_leadership blocks until this pod leads a term whose token is above
# $fenced, and sets $token. GET /v1/watch answers at once without index (or
# when the state has moved on), and otherwise blocks until the state changes:
# a blocking query, not a poll. A return does not promise a change.
wait_for_leadership() {
	index=
	while :; do
		http GET "$LEASEHOLD_URL/v1/watch?wait=$WATCH_WAIT${index:+&index=$index}" --max-time 90
		if [ "$code" != 200 ]; then
			log "watch failed (HTTP $code); retrying in 1s"
			index=
			nap 1
			continue
		fi
		index=$(field index) token=$(field fencingToken) lease=$(text lease) namespace=$(text namespace)
		case $body in *'"leader":true'*) [ "$token" -gt "$fenced" ] && return ;; esac
	done
}

# work writes every INTERVAL while this pod leads, and returns when it must
# stop; after a 409 it sets $fenced to the rejected token.
work() {
	n=0
	while :; do
		# Rule 1: ask before every write; never cache the answer.
		http GET "$LEASEHOLD_URL/v1/token" --max-time 2
		case $code in
		200) ;;
		503) log "leadership lost; stopping work" && return ;;
		*) log "token check failed (HTTP $code); retrying in 1s" && nap 1 && return ;;
		esac
		token=$(field fencingToken) valid=$(field validForMs)

		# Too close to the end of the term to start a write: skip it. The
		# sidecar renews every retry period; check again at the next tick.
		if [ "$valid" -ge "$MARGIN_MS" ]; then
			# Rule 2: the token travels with the write; the store checks it.
			n=$((n + 1))
			http POST "$STORE_URL?token=$token&writer=$WORKER_NAME" --max-time 2 --data-binary "write $n"
			case $code in
			2??) ;;
			409)
				log "store rejected token $token: a newer leader has written; stopping work"
				fenced=$token
				return
				;;
			*) log "store answered HTTP $code; retrying in 1s" && nap 1 && return ;;
			esac
			if [ -n "$FENCED_CONFIGMAP" ]; then
				fenced_write "$n"
				case $? in
				1)
					log "apiserver refused token $token: $refusal; stopping work"
					fenced=$token
					return
					;;
				2) nap 1 && return ;;
				esac
			fi
		fi
		nap "$INTERVAL"
	done
}

fenced=0 # the largest token the store has refused: never lead with it again
while :; do
	log "waiting for leadership"
	wait_for_leadership
	log "leading with fencing token $token; starting work"
	work
done
