#!/usr/bin/env bash
# Takes the single node down (make node-down) and removes everything
# up.sh and the node's processes created: the pods (through the kubelet,
# so CNI releases their addresses and namespaces), the processes (by
# recorded pid and start time only), leftover shims of this node's
# containerd, mounts under NODE_STATE, the CNI network namespaces, the
# kubepods cgroups (rmdir only: no hierarchy is mounted or unmounted),
# iptables rules and chains (KUBE-, CNI-, LH-) and the nft tables
# iptables-nft created, the bridges, veths and routes, the sysctls the
# kubelet changed, the host paths it created and NODE_STATE itself. Safe
# to run again, and after a failed start; check-leftovers.sh then finds
# nothing.
set -uo pipefail
. "$(dirname "$0")/lib.sh"

# 1. Pods first, while the kubelet still runs, so CNI DEL runs for each.
if alive kube-apiserver && alive kubelet; then
	stop kube-controller-manager 10
	$KUBECTL delete namespaces --all --wait=false >/dev/null 2>&1 # default, kube-* refuse: their pods go below
	$KUBECTL delete pods --all -A --grace-period=5 --wait=false >/dev/null 2>&1
	for _ in $(seq 60); do
		[[ $($KUBECTL get pods -A --no-headers 2>/dev/null | wc -l) == 0 ]] && break
		sleep 1
	done
	for _ in $(seq 30); do
		[[ -z $($CTR tasks ls -q 2>/dev/null) ]] && break
		sleep 1
	done
fi
stop kube-proxy 5
stop kube-controller-manager 10
stop kube-scheduler 5
stop kubelet 15

# 2. Whatever containerd still runs.
if alive containerd; then
	for id in $($CTR tasks ls -q 2>/dev/null); do $CTR tasks kill -s SIGKILL "$id" >/dev/null 2>&1; done
	sleep 1
	for id in $($CTR tasks ls -q 2>/dev/null); do $CTR tasks delete -f "$id" >/dev/null 2>&1; done
	for id in $($CTR containers ls -q 2>/dev/null); do $CTR containers delete "$id" >/dev/null 2>&1; done
fi
stop containerd 10
# Shims that outlived containerd: only those serving this node's socket.
for p in $(pgrep -x containerd-shim 2>/dev/null; pgrep -f '^/usr/bin/containerd-shim-runc-v2 ' 2>/dev/null); do
	if tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "-address $SOCK "; then
		log "killing leftover shim $p"
		kill -KILL "$p" 2>/dev/null
	fi
done
stop kube-apiserver 10
stop etcd 10

# 3. Mounts under NODE_STATE (deepest first), then the CNI namespaces.
for m in $(awk -v s="$NODE_STATE/" 'index($2, s) == 1 {print $2}' /proc/mounts | sort -r); do
	umount -l "$m" 2>/dev/null && log "unmounted $m"
done
for n in $(ls /var/run/netns 2>/dev/null); do
	[[ $n == cni-* ]] || continue
	grep -qx "$n" "$NODE_STATE/netns.before" 2>/dev/null && continue
	umount -l "/var/run/netns/$n" 2>/dev/null
	rm -f "/var/run/netns/$n" && log "removed network namespace $n"
done

# 4. The kubepods cgroups the kubelet and runc made in each hierarchy.
for h in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
	[[ -d ${h}kubepods ]] || continue
	find "${h}kubepods" -depth -type d -exec rmdir {} \; 2>/dev/null
	[[ -d ${h}kubepods ]] && log "warning: ${h}kubepods is still there"
done

# 5. iptables: the jumps from built-in chains into KUBE-, CNI- and LH-
#    chains, this node's DROP rules, then those chains.
for ipt in iptables ip6tables; do
	for t in filter nat mangle raw; do
		$ipt -w -t $t -S 2>/dev/null | grep -E '^-A (PREROUTING|INPUT|FORWARD|OUTPUT|POSTROUTING) ' |
			grep -E -- "-j (KUBE-|CNI-|LH-)|-s ${POD_RANGE//./\\.} -o [^ ]+ -j DROP" | sed 's/^-A /-D /' |
			while read -r rule; do eval "$ipt -w -t $t $rule"; done
		chains=$($ipt -w -t $t -S 2>/dev/null | awk '/^-N (KUBE-|CNI-|LH-)/ {print $2}')
		for c in $chains; do $ipt -w -t $t -F "$c"; done
		for c in $chains; do $ipt -w -t $t -X "$c"; done
	done
done
# nft tables that iptables-nft created for the node and that are now empty.
if command -v nft >/dev/null && [[ -f $NODE_STATE/nft-tables.before ]]; then
	nft list tables 2>/dev/null | while read -r _ fam name; do
		grep -qx "table $fam $name" "$NODE_STATE/nft-tables.before" && continue
		[[ $fam == ip || $fam == ip6 ]] && [[ $name =~ ^(filter|nat|mangle|raw|security)$ ]] || continue
		rules=$(nft list table "$fam" "$name" | grep -vcE '^\s*(table|chain|type|policy|\}|$)')
		[[ $rules == 0 ]] && nft delete table "$fam" "$name" && log "deleted the empty nft table $fam $name"
	done
fi

# 6. veths on the pods' bridge, the bridges, the routes.
if [[ -e /sys/class/net/$POD_BRIDGE ]]; then
	for l in $(ls "/sys/class/net/$POD_BRIDGE/brif" 2>/dev/null); do ip link del "$l" 2>/dev/null; done
fi
ip link del $POD_BRIDGE 2>/dev/null && log "deleted $POD_BRIDGE"
ip link del $NODE_BRIDGE 2>/dev/null && log "deleted $NODE_BRIDGE"
for r in $CATCH_ALL_RANGES; do ip route del unreachable "$r" 2>/dev/null && log "deleted the route unreachable $r"; done

# 7. Sysctls back to what they were.
if [[ -f $NODE_STATE/sysctl.before ]]; then
	while read -r k _ v; do
		[[ -n $k && $(sysctl -n "$k" 2>/dev/null) != "$v" ]] && sysctl -qw "$k=$v" && log "restored $k=$v"
	done <"$NODE_STATE/sysctl.before"
fi

# 8. The kubelet's log links point into NODE_STATE; host paths that did not
#    exist before (containerd 1.6's /run/containerd, ...), if empty of files.
for f in /var/log/containers/*.log; do
	[[ -L $f && $(readlink "$f") == "$NODE_STATE"/* ]] && rm -f "$f"
done
if [[ -f $NODE_STATE/hostpaths.before ]]; then
	for d in $HOST_PATHS; do
		[[ -e $d ]] || continue
		grep -qx "$d" "$NODE_STATE/hostpaths.before" && continue
		if [[ -z $(find "$d" -mindepth 1 -not -type d 2>/dev/null | head -1) ]]; then
			rm -rf "$d" && log "removed $d"
		else
			log "warning: $d holds files: $(find "$d" -mindepth 1 -not -type d | head -3 | tr '\n' ' ')"
		fi
	done
fi

if [[ -n ${LEASEHOLD_NODE_KEEP_LOGS:-} && -d $LOGS ]]; then
	rm -rf "$LEASEHOLD_NODE_KEEP_LOGS" && cp -r "$LOGS" "$LEASEHOLD_NODE_KEEP_LOGS" && log "logs kept in $LEASEHOLD_NODE_KEEP_LOGS"
fi
rm -rf "$NODE_STATE"
log "node down"
