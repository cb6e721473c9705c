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
The sidecar image: by digest if one is set, else by tag (default: the
chart's appVersion).
*/}}
{{- define "leasehold.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
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
- name: LEASEHOLD_LEASE_NAME
  value: {{ include "leasehold.leaseName" . | quote }}
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
{{- end }}
{{- end }}
{{- if .Values.podLabel.enabled }}
- name: LEASEHOLD_POD_LABEL
  value: {{ .Values.podLabel.key | quote }}
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

Without nativeSidecar it is a plain container for clusters older than 1.29:
put it under containers (see README.md for the shutdown caveat).
*/}}
{{- define "leasehold.container" -}}
{{- if and .Values.nativeSidecar (semverCompare "<1.29.0-0" .Capabilities.KubeVersion.Version) }}
{{- fail (printf "nativeSidecar needs Kubernetes >= 1.29 (this cluster: %s); set nativeSidecar=false and run leasehold as a plain container" .Capabilities.KubeVersion.Version) }}
{{- end -}}
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
distroless, without cp or a shell: the binary copies itself (`leasehold
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
{{- fail "metrics.podSelector is required for metrics.serviceMonitor and metrics.podMonitor unless demo.enabled: set it to the labels of the Pods that run the leasehold sidecar" }}
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
election: its Lease in the release namespace.
*/}}
{{- define "leasehold.alertSelector" -}}
namespace="{{ .Release.Namespace }}",lease="{{ include "leasehold.leaseName" . }}"
{{- end }}
