#!/usr/bin/env bash
# Builds the node's local images as `docker save` archives into
# $NODE_STATE/images (up.sh imports them; nothing is ever pulled):
#   registry.k8s.io/pause:3.10.2      Kubernetes' own build/pause/linux/pause.c, gcc -static
#   localhost/leasehold-node/tools:1  Debian's busybox-static and curl (with its libraries),
#                                     /bin/baseline (the bench's client-go LeaderElector) and
#                                     /bin/watchers (test/node's: N watches on a leasehold API)
#   registry.example.com/my-app:1.0.0 the same files; its entrypoint /bin/my-app asks the sidecar
#                                     before each write, as examples/manifests says its app does
# up.sh also names the tools image busybox:1.37 and curlimages/curl:8.11.1, the images the
# examples' manifests and the chart's demo name (busybox here is Debian's 1.35).
# Every archive is assembled with tar (sorted, mtime 0, owner 0) and sha256sum: reproducible.
# Needs KUBE_MODULE_DIR (the k8s.io/kubernetes module's folder) and LEASEHOLD_ROOT.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
: "${KUBE_MODULE_DIR:?set KUBE_MODULE_DIR to the k8s.io/kubernetes module folder (make node does)}"
: "${LEASEHOLD_ROOT:?set LEASEHOLD_ROOT to the repository (make node does)}"
OUT=$NODE_STATE/images
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# mkimage REF ROOTFS OUT ENTRYPOINT-JSON: one layer, the ROOTFS tree.
mkimage() {
	local ref=$1 rootfs=$2 out=$3 entrypoint=$4 w
	w=$(mktemp -d -p "$work")
	tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$rootfs" -cf "$w/layer.tar" .
	local layer config
	layer=$(sha256sum "$w/layer.tar" | cut -d' ' -f1)
	mkdir "$w/$layer" && mv "$w/layer.tar" "$w/$layer/layer.tar"
	jq -n --arg d "sha256:$layer" --argjson ep "$entrypoint" '{architecture: "amd64", os: "linux",
		created: "1970-01-01T00:00:00Z",
		config: {Entrypoint: $ep, Env: ["PATH=/bin:/usr/bin"], WorkingDir: "/"},
		rootfs: {type: "layers", diff_ids: [$d]}, history: [{created: "1970-01-01T00:00:00Z", created_by: "hack/node/images.sh"}]}' >"$w/config.json"
	config=$(sha256sum "$w/config.json" | cut -d' ' -f1)
	mv "$w/config.json" "$w/$config.json"
	jq -n --arg c "$config.json" --arg r "$ref" --arg l "$layer/layer.tar" '[{Config: $c, RepoTags: [$r], Layers: [$l]}]' >"$w/manifest.json"
	tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$w" -cf "$out" manifest.json "$config.json" "$layer"
	log "built $ref ($(du -h "$out" | cut -f1))"
}

[[ $(uname -m) == x86_64 ]] || die "the node's test images are built for amd64 only"

# pause: the sandbox every pod's namespaces hang on.
mkdir -p "$work/pause"
gcc -Os -Wall -Werror -static -DVERSION=v3.10.2-leasehold -o "$work/pause/pause" "$KUBE_MODULE_DIR/build/pause/linux/pause.c"
strip "$work/pause/pause"
mkimage registry.k8s.io/pause:3.10.2 "$work/pause" "$OUT/pause.tar" '["/pause"]'

# tools: a shell, curl, and the client-go baseline.
r=$work/tools
mkdir -p "$r/bin" "$r/etc" "$r/tmp"
chmod 1777 "$r/tmp"
cp /bin/busybox "$r/bin/busybox"
for applet in sh cat cut date echo env false grep head httpd id kill ls mkdir printf ps sed seq sleep sort tail tee test touch tr true wc wget; do
	ln -s busybox "$r/bin/$applet"
done
curl_bin=$(command -v curl)
mkdir -p "$r/usr/bin"
cp "$curl_bin" "$r/usr/bin/curl"
# curl's shared libraries and the loader, at the paths ldd resolves.
for lib in $(ldd "$curl_bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'); do
	mkdir -p "$r$(dirname "$lib")"
	cp -L "$lib" "$r$lib"
done
(cd "$LEASEHOLD_ROOT" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$r/bin/" ./test/node/watchers)
(cd "$LEASEHOLD_ROOT/bench" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$r/bin/" ./baseline) # the bench is a module of its own
cat >"$r/bin/my-app" <<'APP'
#!/bin/sh
# examples/manifests' app: it serves HTTP on 8080 (leader-service.yaml's targetPort; GET
# /cgi-bin/pod answers the pod's name), and before each write it asks the sidecar whether this
# pod leads and takes the fencing token to attach to the write (docs/using.md); the write here
# is a log line.
httpd -f -p 8080 -h /www &
trap 'echo "my-app: SIGTERM: stopping"; kill $!; exit 0' TERM
while :; do
	if token=$(curl -fsS "$LEASEHOLD_URL/v1/token" 2>/dev/null); then
		echo "my-app: leader, writing with $token"
	else
		echo "my-app: not leader"
	fi
	sleep 2 & wait $!
done
APP
chmod 0755 "$r/bin/my-app"
mkdir -p "$r/www/cgi-bin"
printf '#!/bin/sh\nprintf "Content-Type: text/plain\\r\\n\\r\\n"\ncat /etc/hostname\n' >"$r/www/cgi-bin/pod"
chmod 0755 "$r/www/cgi-bin/pod"
printf 'root:x:0:0:root:/:/bin/sh\nnonroot:x:65532:65532:nonroot:/:/bin/false\n' >"$r/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$r/etc/group"
mkimage localhost/leasehold-node/tools:1 "$r" "$OUT/tools.tar" '["/bin/sh"]'
mkimage registry.example.com/my-app:1.0.0 "$r" "$OUT/my-app.tar" '["/bin/my-app"]'
