#!/usr/bin/env bash
# Exits 1, naming each, if anything of the single node is left on the
# machine (make check-no-leftovers runs it): its processes (by their
# binaries, whoever started them), its containerd shims, NODE_STATE and
# mounts under it, the catch-all routes, the bridges, iptables chains
# KUBE-, CNI- and LH- (and the jumps to them), CNI network namespaces,
# kubepods cgroups, and the kubelet's log links.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
left=()
for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy; do
	pgrep -f "^$KUBE_ASSETS/$b .*(--data-dir $NODE_STATE|$NODE_STATE/)" >/dev/null && left+=("process $b: $(pgrep -af "^$KUBE_ASSETS/$b " | grep -F "$NODE_STATE" | cut -c1-120)")
done
pgrep -af "containerd .*--config $ETC/containerd.toml" >/dev/null && left+=("process containerd")
pgrep -af "containerd-shim.*-address $SOCK" >/dev/null && left+=("containerd shims: $(pgrep -f "containerd-shim.*-address $SOCK" | tr '\n' ' ')")
[[ -e $NODE_STATE ]] && left+=("$NODE_STATE")
awk -v s="$NODE_STATE/" 'index($2, s) == 1 {found = 1} END {exit !found}' /proc/mounts && left+=("mounts under $NODE_STATE")
for r in $CATCH_ALL_RANGES; do ip route show "$r" | grep -q . && left+=("route $(ip route show "$r")"); done
for l in $NODE_BRIDGE $POD_BRIDGE; do ip link show "$l" >/dev/null 2>&1 && left+=("link $l"); done
for ipt in iptables ip6tables; do
	for t in filter nat mangle raw; do
		c=$($ipt -w -t $t -S 2>/dev/null | grep -E '^-N (KUBE-|CNI-|LH-)|-j (KUBE-|CNI-|LH-)' | head -3 | tr '\n' ';')
		[[ -n $c ]] && left+=("$ipt -t $t: $c")
	done
done
ls /var/run/netns 2>/dev/null | grep -q '^cni-' && left+=("network namespaces $(ls /var/run/netns | grep '^cni-' | tr '\n' ' ')")
for h in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do [[ -d ${h}kubepods ]] && left+=("cgroup ${h}kubepods"); done
for f in /var/log/containers/*.log; do [[ -L $f && $(readlink "$f") == "$NODE_STATE"/* ]] && left+=("log link $f"); done
if ((${#left[@]})); then
	echo "left behind by the single node (make node-down removes them):"
	printf '  %s\n' "${left[@]}"
	exit 1
fi
