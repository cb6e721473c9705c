#!/usr/bin/env bash
# Writes the node's configuration into $NODE_STATE/etc (up.sh runs it):
# a CA and the certificates signed by it (the apiserver's serving
# certificate, valid for the node address, the kubernetes Service's
# ClusterIP and its names, so pods verify it with kube-root-ca.crt; the
# apiserver's client certificate for the kubelet), the ServiceAccount key
# pair, static tokens for the admin and each component (the default RBAC
# bindings cover them; the kubelet's user is system:node:<node>, so the
# Node authorizer and NodeRestriction apply), their kubeconfigs, and the
# configurations of the kubelet, kube-proxy, containerd and CNI.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
: "${CNI_DIR:?set LEASEHOLD_CNI_DIR (make node does)}"
P=$ETC/pki
mkdir -p "$P" "$ETC/cni" "$ETC/certs.d"

(
	cd "$P"
	openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 7 -subj "/CN=leasehold-node-ca" 2>/dev/null
	openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver" 2>/dev/null
	printf 'subjectAltName=IP:%s,IP:%s,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\nextendedKeyUsage=serverAuth\n' $API_IP $SVC_IP >apiserver.ext
	openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out apiserver.crt -days 7 -extfile apiserver.ext 2>/dev/null
	openssl req -newkey rsa:2048 -nodes -keyout kubelet-client.key -out kubelet-client.csr -subj "/CN=kube-apiserver" 2>/dev/null
	printf 'extendedKeyUsage=clientAuth\n' >kubelet-client.ext
	openssl x509 -req -in kubelet-client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out kubelet-client.crt -days 7 -extfile kubelet-client.ext 2>/dev/null
	openssl genrsa -out sa.key 2048 2>/dev/null
	openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
	rm -f ./*.csr ./*.ext
)

token() { head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
{
	echo "$(token),admin,admin,\"system:masters\""
	echo "$(token),system:node:$NODE_NAME,kubelet,\"system:nodes\""
	echo "$(token),system:kube-proxy,kube-proxy,\"\""
	echo "$(token),system:kube-controller-manager,kube-controller-manager,\"\""
	echo "$(token),system:kube-scheduler,kube-scheduler,\"\""
} >"$ETC/tokens.csv"
chmod 0600 "$ETC/tokens.csv"

kubeconfig() { # FILE USER
	local tok
	tok=$(awk -F, -v u="$2" '$2 == u {print $1}' "$ETC/tokens.csv")
	cat >"$ETC/$1.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: leasehold-node
  cluster: {server: "https://$API_IP:$API_PORT", certificate-authority: "$P/ca.crt"}
users:
- name: $2
  user: {token: $tok}
contexts:
- name: leasehold-node
  context: {cluster: leasehold-node, user: $2}
current-context: leasehold-node
EOF
	chmod 0600 "$ETC/$1.kubeconfig"
}
kubeconfig admin admin
kubeconfig kubelet system:node:$NODE_NAME
kubeconfig kube-proxy system:kube-proxy
kubeconfig controller-manager system:kube-controller-manager
kubeconfig scheduler system:kube-scheduler

cat >"$ETC/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false # the kubelet refuses cgroup v1 otherwise (CI's VM has it)
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$SOCK
address: $API_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$P/ca.crt"}
authorization: {mode: Webhook}
resolvConf: "" # pods get no upstream nameserver: no DNS query leaves the machine
clusterDomain: cluster.local
failSwapOn: false
maxPods: 40
serializeImagePulls: false
rotateCertificates: false
serverTLSBootstrap: false
podLogsDirectory: $RUN/pod-logs
evictionHard: {memory.available: "200Mi", nodefs.available: "2%", imagefs.available: "2%", nodefs.inodesFree: "2%"}
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
shutdownGracePeriod: 0s
oomScoreAdj: 0 # without CAP_SYS_RESOURCE the kubelet cannot lower its own score
EOF

cat >"$ETC/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "$ETC/kube-proxy.kubeconfig"}
hostnameOverride: $NODE_NAME
mode: iptables
clusterCIDR: $POD_RANGE
nodePortAddresses: ["$API_IP/32"]
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
# The machine's conntrack and route_localnet sysctls stay as they are.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false}
oomScoreAdj: 0
EOF

# The pods' bridge exists already (up.sh): isGateway false keeps the plugin
# from turning on forwarding everywhere. Pods get routes to the Service and
# node ranges only: no default route.
cat >"$ETC/cni/10-leasehold-node.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "leasehold-node",
  "plugins": [
    {
      "type": "bridge", "bridge": "$POD_BRIDGE", "isGateway": false, "ipMasq": false, "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$RUN/cni-ipam",
        "ranges": [[{"subnet": "$NODE_POD_CIDR", "gateway": "$POD_GW"}]],
        "routes": [{"dst": "$SVC_RANGE"}, {"dst": "$NODE_RANGE"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF

# Every registry is redirected to a closed local port: an image that was
# not imported fails to pull instead of being fetched. containerd 1.6
# ignores a hosts.toml without a [host] table and then goes to the real
# registry, so each has one.
for r in _default docker.io registry-1.docker.io registry.k8s.io quay.io ghcr.io gcr.io registry.example.com localhost; do
	mkdir -p "$ETC/certs.d/$r"
	printf 'server = "http://127.0.0.1:9"\n\n[host."http://127.0.0.1:9"]\n  capabilities = ["pull", "resolve"]\n' >"$ETC/certs.d/$r/hosts.toml"
done

cat >"$ETC/containerd.toml" <<EOF
version = 2
root = "$RUN/containerd/root"
state = "$RUN/containerd/state"
[grpc]
  address = "$SOCK"
[ttrpc]
  address = "$SOCK.ttrpc"
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$RUN/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10.2"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  disable_apparmor = true
  enable_selinux = false
  # Without CAP_SYS_RESOURCE nothing may lower oom_score_adj below
  # containerd's own: clamp instead of failing runc.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "$(command -v runc)"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_DIR"
    conf_dir = "$ETC/cni"
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$ETC/certs.d"
EOF
log "configuration in $ETC"
