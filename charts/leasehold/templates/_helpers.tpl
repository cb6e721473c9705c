{{/*
Named templates. Template names are global across a chart and its
subcharts, so every one is prefixed "leasehold.".

Each takes the leasehold chart's root context. In this chart that is `.`;
in your own chart, with leasehold as a dependency, it is
`.Subcharts.leasehold` (the subchart's Values, Chart, Release and
Capabilities), so names computed there are the same as in this chart's
Role:

  initContainers:
    {{- include "leasehold.container" .Subcharts.leasehold | nindent 8 }}

See README.md, "Use it from your own chart".
*/}}

{{/*
The chart name.
*/}}
{{- define "leasehold.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
A default fully qualified app name, truncated at 63 characters because some
Kubernetes name fields are limited to that (by the DNS naming spec). If the
release name contains the chart name it is used as the full name.
*/}}
{{- define "leasehold.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Chart name and version, as used by the helm.sh/chart label.
*/}}
{{- define "leasehold.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Common labels.
*/}}
{{- define "leasehold.labels" -}}
helm.sh/chart: {{ include "leasehold.chart" . }}
{{ include "leasehold.selectorLabels" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
Selector labels.
*/}}
{{- define "leasehold.selectorLabels" -}}
app.kubernetes.io/name: {{ include "leasehold.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The ServiceAccount the pods run as, and the RoleBinding binds. Without
serviceAccount.create, serviceAccount.name is required: falling back to the
namespace's "default" ServiceAccount would grant the Lease to every pod
that runs as it.
*/}}
{{- define "leasehold.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "leasehold.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false (the ServiceAccount the pods run as and the RoleBinding binds)" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The name of the Lease: leaseName, else the full name. The Role's
resourceNames and the sidecar's LEASEHOLD_LEASE_NAME both come from here.
*/}}
{{- define "leasehold.leaseName" -}}
{{- default (include "leasehold.fullname" .) .Values.leaseName }}
{{- end }}

{{/*
leasehold.grouped: "true" when a lease group is configured (leases or
shards), else empty.
*/}}
{{- define "leasehold.grouped" -}}
{{- if or .Values.leases .Values.shards }}true{{ end }}
{{- end }}

{{/*
leasehold.membership: "true" when the sidecar keeps a member Lease (a lease
group, handover: successor, or appRank.url), else empty.
*/}}
{{- define "leasehold.membership" -}}
{{- if or (include "leasehold.grouped" .) (eq .Values.handover "successor") .Values.appRank.url }}true{{ end }}
{{- end }}

{{/*
leasehold.prioritized: "true" when LEASEHOLD_PRIORITY applies: with
handover: successor, or with appRank.url and handover unset (the sidecar
then defaults to successor), else empty.
*/}}
{{- define "leasehold.prioritized" -}}
{{- if or (eq .Values.handover "successor") (and .Values.appRank.url (not .Values.handover)) }}true{{ end }}
{{- end }}

{{/*
leasehold.memberGroup: the name the members are grouped under
(leasehold.io/member-of): the group's, or with handover: successor on a
single Lease, the Lease's.
*/}}
{{- define "leasehold.memberGroup" -}}
{{- if include "leasehold.grouped" . }}{{ include "leasehold.group" . }}{{ else }}{{ include "leasehold.leaseName" . }}{{ end }}
{{- end }}

{{/*
leasehold.advertisedPort: the port this replica advertises (the proxy's
when it is on, else leaderAddress.port), 0 for none.
*/}}
{{- define "leasehold.advertisedPort" -}}
{{- if .Values.proxy.enabled }}{{ .Values.proxy.port }}{{ else }}{{ .Values.leaderAddress.port | default 0 }}{{ end }}
{{- end }}

{{/*
leasehold.group: the lease group's name (LEASEHOLD_GROUP): group, else the
full name. Used only when a group is configured.
*/}}
{{- define "leasehold.group" -}}
{{- default (include "leasehold.fullname" .) .Values.group }}
{{- end }}

{{/*
leasehold.leaseNames: every Lease the sidecar follows, comma-separated, in
configured order: leaseName alone; the roles of leases; or, with shards=N,
<leaseName>-0 … <leaseName>-<N-1>. The Role's resourceNames and the helm
test come from here. It checks the values first (leasehold.validate).
*/}}
{{- define "leasehold.leaseNames" -}}
{{- include "leasehold.validate" . }}
{{- include "leasehold.leaseList" . }}
{{- end }}

{{/*
leasehold.leaseList: leasehold.leaseNames without the check of the values,
for leasehold.validate itself.
*/}}
{{- define "leasehold.leaseList" -}}
{{- if .Values.leases }}
{{- join "," .Values.leases }}
{{- else if .Values.shards }}
{{- $prefix := include "leasehold.leaseName" . }}
{{- $names := list }}
{{- range $i := until (int .Values.shards) }}
{{- $names = append $names (printf "%s-%d" $prefix $i) }}
{{- end }}
{{- join "," $names }}
{{- else }}
{{- include "leasehold.leaseName" . }}
{{- end }}
{{- end }}

{{/*
leasehold.celString: a string as a CEL string literal (for the admission
policy of rbac.leaseWritePolicy). Lease and group names are DNS subdomains
and label values: no quote or backslash to escape, but escape them anyway.
*/}}
{{- define "leasehold.celString" -}}
'{{ . | replace "\\" "\\\\" | replace "'" "\\'" }}'
{{- end }}

{{/*
leasehold.celStrings: a list of strings as the elements of a CEL list
literal, comma-separated.
*/}}
{{- define "leasehold.celStrings" -}}
{{- $out := list }}
{{- range . }}{{ $out = append $out (include "leasehold.celString" .) }}{{ end }}
{{- join ", " $out }}
{{- end }}

{{/*
leasehold.validate renders nothing: it fails, with a message naming the
values, on the combinations the sidecar refuses at start (it would exit 2)
that values.schema.json cannot express: the lease group's, observer's,
handover's, proxy's and group leader label's rules
(leasehold.validateGroupPodLabel), and the timings' relations
(leasehold.validateTimings); and on both monitors at once. Every rendering
runs it (templates/validate.yaml), and so does every include of
leasehold.env or leasehold.container from another chart.
*/}}
{{- define "leasehold.validate" -}}
{{- $grouped := include "leasehold.grouped" . }}
{{- if and .Values.leases .Values.shards }}
{{- fail (printf "leases (%s) and shards (%v) are both set: a lease group is either named roles (leases) or shards named after leaseName (shards); set one of them" (join "," .Values.leases) .Values.shards) }}
{{- end }}
{{- if and .Values.leases .Values.leaseName }}
{{- fail (printf "leases is set together with leaseName=%q: leaseName names the single Lease (or, with shards, the shards' prefix), while with leases each role names its own Lease; unset leaseName" .Values.leaseName) }}
{{- end }}
{{- if .Values.shards }}
{{- $last := printf "%s-%d" (include "leasehold.leaseName" .) (sub (int .Values.shards) 1) }}
{{- if gt (len $last) 253 }}
{{- fail (printf "shards=%v: the shard Lease %q is longer than 253 characters (a DNS subdomain); shorten leaseName" .Values.shards $last) }}
{{- end }}
{{- end }}
{{- if not $grouped }}
{{- if .Values.group }}
{{- fail (printf "group=%q has no effect on a single Lease: set leases or shards for a lease group, or unset group" .Values.group) }}
{{- end }}
{{- if not .Values.balance }}
{{- fail "balance=false has no effect on a single Lease: set leases or shards for a lease group, or unset balance" }}
{{- end }}
{{- else }}
{{- $group := include "leasehold.group" . }}
{{- if or (gt (len $group) 63) (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$" $group)) }}
{{- fail (printf "the group name %q must be a label value that makes valid member Lease names (<group>-member-<hash>): at most 63 characters, lower-case letters, digits, '-' and '.'; set group" $group) }}
{{- end }}
{{- if .Values.podLabel.enabled }}
{{- include "leasehold.validateGroupPodLabel" . }}
{{- end }}
{{- end }}
{{- if and (not (include "leasehold.prioritized" .)) (ne (int .Values.priority) 0) }}
{{- fail (printf "priority=%v has no effect without handover=successor (or appRank.url with handover unset)" .Values.priority) }}
{{- end }}
{{- if and (eq .Values.handover "successor") (not .Values.candidate) }}
{{- fail "handover=successor with candidate=false: an observer holds nothing to hand over; unset one" }}
{{- end }}
{{- if and .Values.proxy.enabled (not .Values.candidate) }}
{{- fail "proxy.enabled with candidate=false: an observer never leads; run the proxy beside a candidate" }}
{{- end }}
{{- if .Values.appRank.url }}
{{- if $grouped }}
{{- fail (printf "appRank.url=%q with a lease group (leases or shards): one app's rank ranks it for one Lease; unset one" .Values.appRank.url) }}
{{- end }}
{{- if not .Values.candidate }}
{{- fail (printf "candidate=false (an observer, which is never a successor) together with appRank.url=%q (data-aware failover): unset one" .Values.appRank.url) }}
{{- end }}
{{- end }}
{{- if and (include "leasehold.membership" .) (not $grouped) }}
{{- $lease := include "leasehold.leaseName" . }}
{{- if or (gt (len $lease) 63) (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$" $lease)) }}
{{- fail (printf "%s groups the members under the Lease's name %q, which must be a label value that makes valid member Lease names: at most 63 characters; shorten leaseName" (ternary "appRank.url" "handover=successor" (ne .Values.handover "successor")) $lease) }}
{{- end }}
{{- end }}
{{- if and (not .Values.candidate) .Values.appHealth.url }}
{{- fail (printf "candidate=false (an observer, which never campaigns) together with appHealth.url=%q (health-gated candidacy): unset one" .Values.appHealth.url) }}
{{- end }}
{{- include "leasehold.validateTimings" . }}
{{- if and .Values.metrics.serviceMonitor.enabled .Values.metrics.podMonitor.enabled }}
{{- fail "metrics.serviceMonitor.enabled and metrics.podMonitor.enabled are both true: Prometheus would scrape every Pod twice (two series for each, double counts in every sum); enable one of them" }}
{{- end }}
{{- end }}

{{/*
leasehold.validateGroupPodLabel renders nothing: with a lease group and
podLabel.enabled it fails on what the sidecar refuses at start (rules 8
and 9 of its configuration), with the sidecar's own message followed by
the values to change: more than 64 Leases (podlabel.MaxGroupLeases), or a
Lease whose leader label key <podLabel.key>-<lease> is no qualified label
name. values.schema.json has checked podLabel.key, and the Lease names are
DNS subdomains, so only the key's name part can be too long: at most 63
characters.
*/}}
{{- define "leasehold.validateGroupPodLabel" -}}
{{- $leases := splitList "," (include "leasehold.leaseList" .) }}
{{- $var := ternary "LEASEHOLD_LEASES" "LEASEHOLD_SHARDS" (not (empty .Values.leases)) }}
{{- if gt (len $leases) 64 }}
{{- fail (printf "LEASEHOLD_POD_LABEL: set with a lease group of %d Leases (%s): the leader label keeps one label per Lease on the Pod, and patches the Pod for each Lease's change; at most 64 Leases (set podLabel.enabled, %s)" (len $leases) $var (ternary "leases" "shards" (not (empty .Values.leases)))) }}
{{- end }}
{{- $key := .Values.podLabel.key }}
{{- $name := regexReplaceAll "^.*/" $key "" }}
{{- range $leases }}
{{- if gt (add (len $name) 1 (len .)) 63 }}
{{- fail (printf "LEASEHOLD_POD_LABEL: %q with the Lease %q of the group makes the leader label key %q, which is not a valid label key: name part must be no more than 63 bytes; shorten the key or the Lease's name (set podLabel.key, %s)" $key . (printf "%s-%s" $key .) (ternary "leases" "leaseName" (not (empty $.Values.leases)))) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
leasehold.validateTimings renders nothing: it fails on the timings the
sidecar refuses at start (decide.Config.Validate, and with appHealth.url
apphealth.Config.Validate: rules 4 and 7 of its configuration), in the
sidecar's order and with the sidecar's own message (the durations shown as
Go shows them), followed by the values to change. values.schema.json has
already checked each value's form.
*/}}
{{- define "leasehold.validateTimings" -}}
{{- $ns := dict }}
{{- range $name, $value := .Values.timings }}
{{- $_ := set $ns $name (include "leasehold.durationNanos" $value | atoi) }}
{{- end }}
{{- $lease := $ns.leaseDuration }}{{ $renew := $ns.renewDeadline }}{{ $retry := $ns.retryPeriod }}
{{- $show := dict "lease" (include "leasehold.durationString" $lease) "renew" (include "leasehold.durationString" $renew) "retry" (include "leasehold.durationString" $retry) }}
{{- if or (lt $lease 1000000000) (ne (mod $lease 1000000000) 0) }}
{{- fail (printf "LEASEHOLD_LEASE_DURATION: leaseDuration (%s) must be a whole number of seconds and at least 1s (set timings.leaseDuration)" $show.lease) }}
{{- else if le $retry 0 }}
{{- fail (printf "LEASEHOLD_RETRY_PERIOD: retryPeriod (%s) must be greater than 0 (set timings.retryPeriod)" $show.retry) }}
{{- else if or (le $renew 0) (le (mul $renew 5) (mul $retry 6)) }}
{{- fail (printf "LEASEHOLD_RENEW_DEADLINE=%s must be greater than 1.2 × LEASEHOLD_RETRY_PERIOD=%s (set timings.renewDeadline, timings.retryPeriod)" $show.renew $show.retry) }}
{{- else if ge $retry (sub $lease $renew) }}
{{- fail (printf "LEASEHOLD_RENEW_DEADLINE=%s + LEASEHOLD_RETRY_PERIOD=%s must be less than LEASEHOLD_LEASE_DURATION=%s (set timings.renewDeadline, timings.retryPeriod, timings.leaseDuration)" $show.renew $show.retry $show.lease) }}
{{- end }}
{{- with .Values.appHealth }}
{{- if or .url $.Values.appRank.url }}
{{- $timeout := include "leasehold.durationNanos" .timeout | atoi }}
{{- $interval := include "leasehold.durationNanos" .interval | atoi }}
{{- if le $timeout 0 }}
{{- fail (printf "LEASEHOLD_APP_HEALTH_TIMEOUT: timeout (%s) must be greater than 0 (set appHealth.timeout)" (include "leasehold.durationString" $timeout)) }}
{{- else if le $interval 0 }}
{{- fail (printf "LEASEHOLD_APP_HEALTH_INTERVAL: interval (%s) must be greater than 0 (set appHealth.interval)" (include "leasehold.durationString" $interval)) }}
{{- else if gt $timeout $interval }}
{{- fail (printf "LEASEHOLD_APP_HEALTH_TIMEOUT=%s must not exceed LEASEHOLD_APP_HEALTH_INTERVAL=%s (set appHealth.timeout, appHealth.interval)" (include "leasehold.durationString" $timeout) (include "leasehold.durationString" $interval)) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The sidecar image: <registry>/<repository> (repository alone when registry
is empty), by digest if one is set (the tag is then ignored), else by tag
(default: the chart's appVersion).
*/}}
{{- define "leasehold.image" -}}
{{- $name := .Values.image.repository }}
{{- with .Values.image.registry }}{{ $name = printf "%s/%s" . $name }}{{ end }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $name .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $name (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
The URL of the sidecar's API for the app containers of the same pod.
*/}}
{{- define "leasehold.apiURL" -}}
{{- printf "http://127.0.0.1:%v" .Values.ports.api }}
{{- end }}

{{/*
leasehold.env: the leasehold container's environment, a YAML list of
EnvVar. Identity and namespace come from the Downward API: the sidecar's
identity is POD_NAME plus a random suffix per process (never a hostname or
a PID, which have collided in real incidents), and the Lease lives in
POD_NAMESPACE, the namespace the Role is in.
*/}}
{{- define "leasehold.env" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- include "leasehold.validate" . }}
{{- $advertised := include "leasehold.advertisedPort" . | int }}
{{- if $advertised }}
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
- name: LEASEHOLD_ADVERTISE_ADDRESS
  value: {{ printf "$(POD_IP):%d" $advertised | quote }}
{{- end }}
{{- if .Values.proxy.enabled }}
- name: LEASEHOLD_PROXY_ADDR
  value: {{ printf ":%v" .Values.proxy.port | quote }}
- name: LEASEHOLD_PROXY_UPSTREAM
  value: {{ .Values.proxy.upstream | quote }}
{{- end }}
{{- if .Values.handover }}
- name: LEASEHOLD_HANDOVER
  value: {{ .Values.handover | quote }}
{{- end }}
{{- if and (include "leasehold.prioritized" .) .Values.priority }}
- name: LEASEHOLD_PRIORITY
  value: {{ printf "%d" (int .Values.priority) | quote }}
{{- end }}
{{- if .Values.leases }}
- name: LEASEHOLD_LEASES
  value: {{ include "leasehold.leaseNames" . | quote }}
{{- else }}
- name: LEASEHOLD_LEASE_NAME
  value: {{ include "leasehold.leaseName" . | quote }}
{{- end }}
{{- if .Values.shards }}
- name: LEASEHOLD_SHARDS
  value: {{ printf "%d" (int .Values.shards) | quote }}
{{- end }}
{{- if include "leasehold.grouped" . }}
- name: LEASEHOLD_GROUP
  value: {{ include "leasehold.group" . | quote }}
- name: LEASEHOLD_BALANCE
  value: {{ .Values.balance | quote }}
{{- end }}
{{- if not .Values.candidate }}
- name: LEASEHOLD_CANDIDATE
  value: "false"
{{- end }}
- name: LEASEHOLD_LEASE_DURATION
  value: {{ .Values.timings.leaseDuration | quote }}
- name: LEASEHOLD_RENEW_DEADLINE
  value: {{ .Values.timings.renewDeadline | quote }}
- name: LEASEHOLD_RETRY_PERIOD
  value: {{ .Values.timings.retryPeriod | quote }}
- name: LEASEHOLD_RELEASE_ON_SHUTDOWN
  value: {{ .Values.releaseOnShutdown | quote }}
- name: LEASEHOLD_API_ADDR
  value: {{ printf "127.0.0.1:%v" .Values.ports.api | quote }}
- name: LEASEHOLD_OPS_ADDR
  value: {{ printf ":%v" .Values.ports.ops | quote }}
- name: LEASEHOLD_MAX_BLOCKING_REQUESTS
  value: {{ printf "%d" (int .Values.maxBlockingRequests) | quote }}
- name: LEASEHOLD_LOG_LEVEL
  value: {{ .Values.log.level | quote }}
- name: LEASEHOLD_LOG_FORMAT
  value: {{ .Values.log.format | quote }}
{{- with .Values.appHealth }}
{{- if .url }}
- name: LEASEHOLD_APP_HEALTH_URL
  value: {{ .url | quote }}
- name: LEASEHOLD_APP_HEALTH_TIMEOUT
  value: {{ .timeout | quote }}
- name: LEASEHOLD_APP_HEALTH_INTERVAL
  value: {{ .interval | quote }}
- name: LEASEHOLD_APP_HEALTH_FAILURE_THRESHOLD
  value: {{ .failureThreshold | quote }}
- name: LEASEHOLD_APP_HEALTH_SUCCESS_THRESHOLD
  value: {{ printf "%d" (int .successThreshold) | quote }}
{{- else if $.Values.appRank.url }}
- name: LEASEHOLD_APP_HEALTH_TIMEOUT
  value: {{ .timeout | quote }}
- name: LEASEHOLD_APP_HEALTH_INTERVAL
  value: {{ .interval | quote }}
{{- end }}
{{- end }}
{{- with .Values.appRank.url }}
- name: LEASEHOLD_APP_RANK_URL
  value: {{ . | quote }}
{{- end }}
{{- if .Values.podLabel.enabled }}
- name: LEASEHOLD_POD_LABEL
  value: {{ .Values.podLabel.key | quote }}
{{- end }}
{{- if .Values.fencing.enabled }}
- name: LEASEHOLD_FENCING_FLOOR
  value: "true"
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
leasehold.container: the leasehold container, as one item of a YAML list.

With nativeSidecar (the default) it is a native sidecar: put it under
initContainers. Its restartPolicy: Always makes the kubelet start it before
the app containers, which start only once its startupProbe (/readyz: the
Lease has been observed) passes, and stop it only after every app container
has exited. That order is what makes releaseOnShutdown safe: the Lease is
released only when the app can no longer write.

Without nativeSidecar it is a plain container: put it under containers
(see README.md for the shutdown caveat).
*/}}
{{- define "leasehold.container" -}}
- name: leasehold
  image: {{ include "leasehold.image" . | quote }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  {{- if .Values.nativeSidecar }}
  restartPolicy: Always
  {{- end }}
  env:
    {{- include "leasehold.env" . | nindent 4 }}
  ports:
    - name: leasehold-ops
      containerPort: {{ .Values.ports.ops }}
      protocol: TCP
    {{- if .Values.proxy.enabled }}
    - name: leasehold-proxy
      containerPort: {{ .Values.proxy.port }}
      protocol: TCP
    {{- end }}
  startupProbe:
    httpGet:
      path: /readyz
      port: leasehold-ops
    periodSeconds: 1
    failureThreshold: 120
  readinessProbe:
    httpGet:
      path: /readyz
      port: leasehold-ops
    periodSeconds: 5
  livenessProbe:
    httpGet:
      path: /livez
      port: leasehold-ops
    periodSeconds: 10
    failureThreshold: 3
  resources:
    {{- toYaml .Values.resources | nindent 4 }}
  securityContext:
    {{- toYaml .Values.securityContext | nindent 4 }}
{{- end }}

{{/*
leasehold.installer: an init container that copies the leasehold binary into
the emptyDir volume "leasehold-bin" (mount it at /leasehold-bin), so that an
app container that cannot speak HTTP can run its command under
`/leasehold-bin/leasehold run -- <command>` (docs/run.md). The image is
the binary alone, without cp or a shell: the binary copies itself (`leasehold
install`, atomic). Put it under initContainers, before leasehold.container;
mount the volume read-only in the app container.
*/}}
{{- define "leasehold.installer" -}}
- name: leasehold-install
  image: {{ include "leasehold.image" . | quote }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  args: ["install", "/leasehold-bin/leasehold"]
  volumeMounts:
    - name: leasehold-bin
      mountPath: /leasehold-bin
  resources:
    {{- toYaml .Values.resources | nindent 4 }}
  securityContext:
    {{- toYaml .Values.securityContext | nindent 4 }}
{{- end }}

{{/*
leasehold.metricsPodSelector: the matchLabels of the Pods that run the
sidecar, which the PodMonitor and the metrics Service select:
metrics.podSelector, else the demo Deployment's Pods. Without either there
is nothing to select, and rendering a monitor fails.
*/}}
{{- define "leasehold.metricsPodSelector" -}}
{{- if .Values.metrics.podSelector }}
{{- toYaml .Values.metrics.podSelector }}
{{- else if .Values.demo.enabled }}
{{- include "leasehold.selectorLabels" . }}
app.kubernetes.io/component: demo
{{- else }}
{{- fail "metrics.podSelector is required for metrics.serviceMonitor, metrics.podMonitor and networkPolicy unless demo.enabled: set it to the labels of the Pods that run the leasehold sidecar" }}
{{- end }}
{{- end }}

{{/*
leasehold.metricsEndpoint: the scrape settings shared by the ServiceMonitor
and the PodMonitor endpoint (port, path, honorLabels, interval, timeout).
Takes a dict with "monitor" (metrics.serviceMonitor or metrics.podMonitor).
honorLabels keeps leasehold's own namespace label (the Lease's namespace)
instead of renaming it exported_namespace next to the target's (the
Pod's); in this chart the two are the same namespace.
*/}}
{{- define "leasehold.metricsEndpoint" -}}
port: leasehold-ops
path: /metrics
honorLabels: true
{{- with .monitor.interval }}
interval: {{ . }}
{{- end }}
{{- with .monitor.scrapeTimeout }}
scrapeTimeout: {{ . }}
{{- end }}
{{- end }}

{{/*
leasehold.alertSelector: the PromQL label matchers of this release's
election: its Lease in the release namespace; with a lease group, every
Lease of the group (each series of a group carries the label group, and
its own lease).
*/}}
{{- define "leasehold.alertSelector" -}}
{{- if include "leasehold.grouped" . -}}
namespace="{{ .Release.Namespace }}",group="{{ include "leasehold.group" . }}"
{{- else -}}
namespace="{{ .Release.Namespace }}",lease="{{ include "leasehold.leaseName" . }}"
{{- end }}
{{- end }}

{{/*
leasehold.fencingResources: fencing.resources as a JSON list of
{"group": ..., "resource": ...}, in order. It fails on what
`leasehold fencing-policy --resources` refuses (internal/fencepolicy:
ParseResources and Options.Validate), with the same message after
"fencing.resources: ": each item RESOURCE (a DNS label, the plural name)
or GROUP/RESOURCE (GROUP a DNS subdomain), no subresource, none twice
(values.schema.json requires at least one).
*/}}
{{- define "leasehold.fencingResources" -}}
{{- $resources := list }}
{{- $seen := dict }}
{{- range $item := .Values.fencing.resources }}
{{- $parts := splitList "/" (trim $item) }}
{{- $r := dict "group" "" "resource" (index $parts 0) }}
{{- if eq (len $parts) 2 }}
{{- $_ := set $r "group" (index $parts 0) }}
{{- $_ := set $r "resource" (index $parts 1) }}
{{- with include "leasehold.dnsSubdomainErrors" $r.group }}
{{- fail (printf "fencing.resources: resource %q: group %q is not a DNS subdomain: %s" $item $r.group .) }}
{{- end }}
{{- else if gt (len $parts) 2 }}
{{- fail (printf "fencing.resources: resource %q: want RESOURCE or GROUP/RESOURCE (subresources are not fenced)" $item) }}
{{- end }}
{{- with include "leasehold.dnsLabelErrors" $r.resource }}
{{- fail (printf "fencing.resources: resource %q: %q is not a resource's plural name (a DNS label): %s" $item $r.resource .) }}
{{- end }}
{{- $name := ternary $r.resource (printf "%s/%s" $r.group $r.resource) (eq $r.group "") }}
{{- if hasKey $seen $name }}
{{- fail (printf "fencing.resources: resource %s named twice" $name) }}
{{- end }}
{{- $_ := set $seen $name true }}
{{- $resources = append $resources $r }}
{{- end }}
{{- toJson $resources }}
{{- end }}

{{/*
leasehold.dnsLabelErrors: why the string is not a DNS label (RFC 1123),
"; "-separated, as Kubernetes' validation.IsDNS1123Label words it; empty
when it is one.
*/}}
{{- define "leasehold.dnsLabelErrors" -}}
{{- $label := "[a-z0-9]([-a-z0-9]*[a-z0-9])?" }}
{{- $errs := list }}
{{- if gt (len .) 63 }}{{ $errs = append $errs "must be no more than 63 characters" }}{{ end }}
{{- if not (regexMatch (printf "^%s$" $label) .) }}
{{- if regexMatch (printf "^%s(\\.%s)*$" $label $label) . }}
{{- $errs = append $errs "must not contain dots" }}
{{- else }}
{{- $errs = append $errs (printf "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '%s')" $label) }}
{{- end }}
{{- end }}
{{- join "; " $errs }}
{{- end }}

{{/*
leasehold.dnsSubdomainErrors: why the string is not a DNS subdomain (RFC
1123), as Kubernetes' validation.IsDNS1123Subdomain words it; empty when
it is one.
*/}}
{{- define "leasehold.dnsSubdomainErrors" -}}
{{- $subdomain := "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*" }}
{{- $errs := list }}
{{- if gt (len .) 253 }}{{ $errs = append $errs "must be no more than 253 characters" }}{{ end }}
{{- if not (regexMatch (printf "^%s$" $subdomain) .) }}
{{- $errs = append $errs (printf "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '%s')" $subdomain) }}
{{- end }}
{{- join "; " $errs }}
{{- end }}
