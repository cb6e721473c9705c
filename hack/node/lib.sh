# Shared by hack/node/*.sh: the single node's fixed names, addresses and
# paths, and the helpers that start and stop its processes. Sourced, never
# run. One node per machine: its addresses, bridges and ports are fixed.
#
# Network layout (nothing of it is reachable from outside the machine):
#   10.200.0.1/32  on lh0, a bridge with no ports: the apiserver's bind and
#                  advertise address and the kubelet's node IP
#   10.244.0.0/24  the pods, on the bridge lhcni0 (gateway 10.244.0.1)
#   10.96.0.0/16   the Services (kube-proxy's iptables DNAT)
# The ranges 10.200.0.0/16, 10.244.0.0/16 and 10.96.0.0/16 get catch-all
# `unreachable` routes before anything starts, so no packet for them can
# leave through the machine's own interface; the mangle chain LH-GUARD drops
# forwarded packets to or from the machine's uplinks, and any packet from
# the pod range routed out of one.

set -o pipefail

NODE_STATE=${LEASEHOLD_NODE_STATE:-/var/lib/leasehold-node}
# down.sh removes NODE_STATE whole: only a folder of the node's own.
[[ $NODE_STATE == /* && $(basename "$NODE_STATE") == *leasehold-node* ]] || { echo "LEASEHOLD_NODE_STATE=$NODE_STATE: want an absolute path whose last part names leasehold-node" >&2; exit 2; }
KUBE_ASSETS=${LEASEHOLD_KUBE_ASSETS:?set LEASEHOLD_KUBE_ASSETS (make node does)}
CNI_DIR=${LEASEHOLD_CNI_DIR:-}
NODE_NAME=leasehold-node
API_IP=10.200.0.1 API_PORT=6443
NODE_RANGE=10.200.0.0/16
POD_RANGE=10.244.0.0/16 NODE_POD_CIDR=10.244.0.0/24 POD_GW=10.244.0.1
SVC_RANGE=10.96.0.0/16 SVC_IP=10.96.0.1
NODE_BRIDGE=lh0 POD_BRIDGE=lhcni0 GUARD=LH-GUARD
ETCD_PORT=32379 ETCD_PEER_PORT=32380
CATCH_ALL_RANGES="$NODE_RANGE $POD_RANGE $SVC_RANGE"
# Host paths the runtime and the kubelet create outside NODE_STATE; down.sh
# removes those that did not exist before up.sh (and only when empty of
# files).
HOST_PATHS="/run/containerd /var/run/netns /var/log/containers /var/log/pods /run/runc"
# Sysctls the kubelet sets while it runs (it has no opt-out); up.sh saves
# them, down.sh restores them.
SAVED_SYSCTLS="vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes net.ipv4.ip_forward net.ipv4.conf.all.route_localnet net.bridge.bridge-nf-call-iptables"

ETC=$NODE_STATE/etc RUN=$NODE_STATE/run
PIDS=$RUN/pids LOGS=$NODE_STATE/logs
SOCK=$RUN/containerd/containerd.sock
KUBECONFIG_ADMIN=$ETC/admin.kubeconfig
KUBECTL="$KUBE_ASSETS/kubectl --kubeconfig $KUBECONFIG_ADMIN"
CTR="ctr --address $SOCK -n k8s.io"

log() { echo "[node $(date -u +%H:%M:%S.%3N)] $*"; }
die() { log "error: $*" >&2; exit 1; }

# uplinks: the interfaces that carry the machine's default routes.
uplinks() { { ip -4 route show default; ip -6 route show default; } 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "dev") print $(i+1)}' | sort -u; }

# launch NAME CMD...: start CMD in a session of its own, logging to
# $LOGS/NAME.log, and record "pid starttime" in $PIDS/NAME: stop and alive
# act on exactly that process, never on a name.
launch() {
	local name=$1
	shift
	mkdir -p "$PIDS" "$LOGS"
	setsid bash -c 'echo $$ > "$0"; exec "$@"' "$PIDS/$name.tmp" "$@" >>"$LOGS/$name.log" 2>&1 </dev/null &
	local i
	for i in $(seq 100); do [[ -s $PIDS/$name.tmp ]] && break; sleep 0.05; done
	local pid
	pid=$(cat "$PIDS/$name.tmp") || die "$name did not start"
	rm -f "$PIDS/$name.tmp"
	echo "$pid $(starttime "$pid")" >"$PIDS/$name"
	log "started $name (pid $pid)"
}

starttime() { awk '{print $22}' "/proc/$1/stat" 2>/dev/null; }

# alive NAME: the process launch recorded is still running.
alive() {
	[[ -f $PIDS/$1 ]] || return 1
	local pid st
	read -r pid st <"$PIDS/$1"
	[[ -n $st && $(starttime "$pid") == "$st" ]]
}

# stop NAME [GRACE]: SIGTERM the recorded process, SIGKILL after GRACE
# seconds (default 10), and forget it.
stop() {
	local name=$1 grace=${2:-10} pid st i
	[[ -f $PIDS/$name ]] || return 0
	read -r pid st <"$PIDS/$name"
	if alive "$name"; then
		kill -TERM "$pid" 2>/dev/null
		for i in $(seq $((grace * 10))); do alive "$name" || break; sleep 0.1; done
		if alive "$name"; then kill -KILL "$pid" 2>/dev/null; sleep 0.2; fi
		log "stopped $name (pid $pid)"
	fi
	rm -f "$PIDS/$name"
}

# wait_for DESCRIPTION SECONDS CMD...: poll CMD every 0.2s until it
# succeeds; fail after SECONDS.
wait_for() {
	local desc=$1 secs=$2
	shift 2
	local end=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		((SECONDS < end)) || { log "timed out after ${secs}s waiting for $desc"; return 1; }
		sleep 0.2
	done
}
