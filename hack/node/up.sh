#!/usr/bin/env bash
# Starts a real single-node Kubernetes on this machine (make node), modelled
# on Kubernetes' hack/local-up-cluster.sh: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, containerd (with runc), the
# kubelet and kube-proxy, with every image built locally and imported and
# every registry redirected to a closed local port, so nothing is pulled.
#
# Order: first the network guard (catch-all unreachable routes for the
# node, pod and Service ranges, the guard chain), then the bridges, then
# the processes. Any failure runs down.sh, which removes everything this
# script created; a node left by an earlier run is taken down first.
#
# Three workarounds for machines like the CI VM (shared/node's recipe):
# no CAP_SYS_RESOURCE (containerd restrict_oom_score_adj, the kubelet's and
# kube-proxy's oomScoreAdj 0), no dummy link driver (the node address is on
# a bridge with no ports), and the CNI bridge plugin's isGateway, which would
# turn on forwarding for every interface (the pod bridge is made here, with
# forwarding on it alone).
#
# Prints KUBECONFIG=<admin kubeconfig> when the node is Ready and the
# cluster usable (default ServiceAccount, kube-root-ca.crt, kube-proxy's
# rules).
set -euo pipefail
here=$(dirname "$(readlink -f "$0")")
. "$here/lib.sh"
: "${CNI_DIR:?set LEASEHOLD_CNI_DIR (make node does)}"
T0=$(date +%s.%N)

[[ $(id -u) == 0 ]] || die "needs root (the kubelet, containerd and the network set-up)"
for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl; do
	[[ -x $KUBE_ASSETS/$b ]] || die "$KUBE_ASSETS/$b is missing: make node-bins"
done
for b in bridge host-local loopback portmap; do [[ -x $CNI_DIR/$b ]] || die "$CNI_DIR/$b is missing: make cni-bin"; done
for c in containerd ctr runc iptables ip6tables ip nft conntrack jq openssl gcc; do
	command -v $c >/dev/null || die "$c is missing (apt-get install containerd runc iptables nftables conntrack jq openssl gcc)"
done
[[ -n $(uplinks) ]] || die "no default route: cannot tell the machine's uplinks to guard"
# The fixed addresses are this node's alone: refuse if someone else holds them.
if [[ -e $NODE_STATE ]] || ip link show "$NODE_BRIDGE" >/dev/null 2>&1 || ip link show "$POD_BRIDGE" >/dev/null 2>&1; then
	log "a node (or what is left of one) is here: taking it down first"
	"$here/down.sh"
fi
for r in $CATCH_ALL_RANGES; do
	if ip route show "$r" | grep -qv '^unreachable'; then die "the machine already routes $r: refusing to start"; fi
done

mkdir -p "$ETC" "$RUN" "$PIDS" "$LOGS"
trap 'rc=$?; if ((rc != 0)); then log "start failed (exit $rc): taking the node down; logs in $LOGS until then"; tail -n 20 "$LOGS"/*.log 2>/dev/null | tail -n 60; "$here/down.sh"; fi' EXIT

# --- what down.sh must put back -----------------------------------------------
sysctl $SAVED_SYSCTLS 2>/dev/null >"$NODE_STATE/sysctl.before" || true
for d in $HOST_PATHS; do [[ -e $d ]] && echo "$d"; done >"$NODE_STATE/hostpaths.before" || true
{ ls /var/run/netns 2>/dev/null || true; } >"$NODE_STATE/netns.before"
{ nft list tables 2>/dev/null || true; } >"$NODE_STATE/nft-tables.before"
uplinks >"$NODE_STATE/uplinks"

# --- network guard, before anything listens or routes -------------------------
for r in $CATCH_ALL_RANGES; do
	ip route show type unreachable | grep -q "^unreachable $r" || ip route add unreachable "$r"
done
for ipt in iptables ip6tables; do
	$ipt -w -t mangle -N $GUARD 2>/dev/null || $ipt -w -t mangle -F $GUARD
	while read -r up; do
		$ipt -w -t mangle -A $GUARD -i "$up" -j DROP
		$ipt -w -t mangle -A $GUARD -o "$up" -j DROP
	done <"$NODE_STATE/uplinks"
	# What the pods send is forwarded only back onto their own bridge.
	$ipt -w -t mangle -A $GUARD -i $POD_BRIDGE ! -o $POD_BRIDGE -j DROP
	$ipt -w -t mangle -I FORWARD 1 -j $GUARD
done
while read -r up; do
	iptables -w -t mangle -I POSTROUTING 1 -s $POD_RANGE -o "$up" -j DROP
done <"$NODE_STATE/uplinks"

ip link add $NODE_BRIDGE type bridge
ip addr add $API_IP/32 dev $NODE_BRIDGE
ip link set $NODE_BRIDGE up
ip link add $POD_BRIDGE type bridge
ip addr add $POD_GW/24 dev $POD_BRIDGE
ip link set $POD_BRIDGE up
sysctl -qw net.ipv4.conf.$POD_BRIDGE.forwarding=1
log "network: $NODE_BRIDGE $API_IP, $POD_BRIDGE $POD_GW/24; unreachable $CATCH_ALL_RANGES; $GUARD drops forwarding to or from $(tr '\n' ' ' <"$NODE_STATE/uplinks")"

# --- PKI, tokens, kubeconfigs, component configs --------------------------------
"$here/config.sh"

# --- images ---------------------------------------------------------------------
"$here/images.sh"

# --- control plane ----------------------------------------------------------------
launch etcd "$KUBE_ASSETS/etcd" --name node --data-dir "$RUN/etcd" \
	--listen-client-urls http://127.0.0.1:$ETCD_PORT --advertise-client-urls http://127.0.0.1:$ETCD_PORT \
	--listen-peer-urls http://127.0.0.1:$ETCD_PEER_PORT --initial-advertise-peer-urls http://127.0.0.1:$ETCD_PEER_PORT \
	--initial-cluster node=http://127.0.0.1:$ETCD_PEER_PORT
wait_for etcd 60 curl -fsS http://127.0.0.1:$ETCD_PORT/health

launch kube-apiserver "$KUBE_ASSETS/kube-apiserver" \
	--etcd-servers=http://127.0.0.1:$ETCD_PORT \
	--bind-address=$API_IP --advertise-address=$API_IP --secure-port=$API_PORT \
	--tls-cert-file="$ETC/pki/apiserver.crt" --tls-private-key-file="$ETC/pki/apiserver.key" \
	--client-ca-file="$ETC/pki/ca.crt" --token-auth-file="$ETC/tokens.csv" \
	--authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
	--service-account-issuer=https://kubernetes.default.svc.cluster.local \
	--service-account-key-file="$ETC/pki/sa.pub" --service-account-signing-key-file="$ETC/pki/sa.key" \
	--service-cluster-ip-range=$SVC_RANGE --allow-privileged=true \
	--kubelet-client-certificate="$ETC/pki/kubelet-client.crt" --kubelet-client-key="$ETC/pki/kubelet-client.key" \
	--kubelet-preferred-address-types=InternalIP --cert-dir="$RUN/apiserver-certs"
wait_for kube-apiserver 120 $KUBECTL get --raw /readyz
$KUBECTL create clusterrolebinding kube-apiserver-kubelet-api-admin --clusterrole=system:kubelet-api-admin \
	--user=kube-apiserver >/dev/null

launch kube-controller-manager "$KUBE_ASSETS/kube-controller-manager" \
	--kubeconfig="$ETC/controller-manager.kubeconfig" \
	--authentication-kubeconfig="$ETC/controller-manager.kubeconfig" \
	--authorization-kubeconfig="$ETC/controller-manager.kubeconfig" \
	--service-account-private-key-file="$ETC/pki/sa.key" --root-ca-file="$ETC/pki/ca.crt" \
	--use-service-account-credentials=true \
	--service-cluster-ip-range=$SVC_RANGE --cluster-cidr=$POD_RANGE --allocate-node-cidrs=true --node-cidr-mask-size=24 \
	--cluster-signing-cert-file="$ETC/pki/ca.crt" --cluster-signing-key-file="$ETC/pki/ca.key" \
	--leader-elect=false --bind-address=127.0.0.1 --secure-port=10257 --cert-dir="$RUN/kcm-certs"
launch kube-scheduler "$KUBE_ASSETS/kube-scheduler" \
	--kubeconfig="$ETC/scheduler.kubeconfig" \
	--authentication-kubeconfig="$ETC/scheduler.kubeconfig" \
	--authorization-kubeconfig="$ETC/scheduler.kubeconfig" \
	--leader-elect=false --bind-address=127.0.0.1 --secure-port=10259

# --- runtime, images ----------------------------------------------------------------
launch containerd env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin containerd --config "$ETC/containerd.toml"
wait_for containerd 60 $CTR version
for t in pause tools my-app; do $CTR images import "$NODE_STATE/images/$t.tar" >/dev/null; done
$CTR images tag localhost/leasehold-node/tools:1 docker.io/library/busybox:1.37 >/dev/null
$CTR images tag localhost/leasehold-node/tools:1 docker.io/curlimages/curl:8.11.1 >/dev/null
# leasehold's own image (make image), under its name and under the chart's
# appVersion, the tag the chart and the examples' manifests name.
: "${LEASEHOLD_IMAGE_ARCHIVE:?set LEASEHOLD_IMAGE_ARCHIVE to the OCI archive of make image (make node does)}"
: "${LEASEHOLD_IMAGE_NAME:?}" "${LEASEHOLD_CHART_APP_VERSION:?}"
$CTR images import --platform linux/amd64 "$LEASEHOLD_IMAGE_ARCHIVE" >/dev/null
chart_image=${LEASEHOLD_IMAGE_NAME%:*}:$LEASEHOLD_CHART_APP_VERSION
[[ $chart_image == "$LEASEHOLD_IMAGE_NAME" ]] || $CTR images tag "$LEASEHOLD_IMAGE_NAME" "$chart_image" >/dev/null
log "images: $($CTR images ls -q | grep -v '^sha256:' | tr '\n' ' ')"

# --- node agents ------------------------------------------------------------------
launch kubelet "$KUBE_ASSETS/kubelet" --config="$ETC/kubelet.yaml" --kubeconfig="$ETC/kubelet.kubeconfig" \
	--root-dir="$RUN/kubelet" --cert-dir="$RUN/kubelet/pki" --hostname-override=$NODE_NAME --node-ip=$API_IP --v=1
node_ready() { [[ $($KUBECTL get node $NODE_NAME -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]; }
wait_for "node $NODE_NAME Ready" 180 node_ready
T_READY=$(date +%s.%N)
launch kube-proxy "$KUBE_ASSETS/kube-proxy" --config="$ETC/kube-proxy.yaml" --v=1
proxy_rules() { iptables -w -t nat -S KUBE-SERVICES 2>/dev/null | grep -q 'default/kubernetes:https'; }
wait_for "kube-proxy's rules for default/kubernetes" 60 proxy_rules
usable() { $KUBECTL -n default get serviceaccount default && $KUBECTL -n default get configmap kube-root-ca.crt; }
wait_for "the default ServiceAccount and kube-root-ca.crt" 60 usable
T_UP=$(date +%s.%N)
printf 'node %s Ready %.1fs after start, usable after %.1fs\n' $NODE_NAME "$(echo "$T_READY - $T0" | bc)" "$(echo "$T_UP - $T0" | bc)" | tee "$NODE_STATE/start-times"
trap - EXIT
echo "KUBECONFIG=$KUBECONFIG_ADMIN"
