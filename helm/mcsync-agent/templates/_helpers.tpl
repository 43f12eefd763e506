{{/* Chart name, truncated to the 63 characters Kubernetes allows in a label. */}}
{{- define "mcsync-agent.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name of the release's objects. */}}
{{- define "mcsync-agent.fullname" -}}
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

{{- define "mcsync-agent.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "mcsync-agent.labels" -}}
helm.sh/chart: {{ include "mcsync-agent.chart" . }}
{{ include "mcsync-agent.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: mcsync
{{- end }}

{{- define "mcsync-agent.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mcsync-agent.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: agent
{{- end }}

{{- define "mcsync-agent.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "mcsync-agent.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "mcsync-agent.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
"true" when replicas elect a leader. Only with several replicas: a single replica has no
peer to race, and its Deployment uses the Recreate strategy so two never overlap.
*/}}
{{- define "mcsync-agent.leaderElect" -}}
{{- if gt (int .Values.replicaCount) 1 }}true{{ end }}
{{- end }}

{{- define "mcsync-agent.tokenSecretName" -}}
{{- default (printf "%s-token" (include "mcsync-agent.fullname" .)) .Values.token.existingSecret }}
{{- end }}
{{- define "mcsync-agent.tokenSecretKey" -}}
{{- if .Values.token.existingSecret }}{{ .Values.token.existingSecretKey }}{{ else }}token{{ end }}
{{- end }}

{{/*
What the agent may do in the namespaces it watches (docs/reference.md#export-path, #import-path). Exactly the verbs it
uses; no wildcard and no Secrets.

Export: read Services, read and update ServiceExports (its finalizer), write their status,
record Events, read each exported Service's EndpointSlices.

Import (unless import.enabled=false): create, replace (PUT with a resourceVersion) and
delete ServiceImports, their status, derived Services and mirrored EndpointSlices. The
agent never uses PATCH on them. RBAC cannot restrict by label: the agent itself touches
only objects labelled app.kubernetes.io/managed-by=mcsync (docs/install.md says so).
*/}}
{{- define "mcsync-agent.rules" -}}
{{- $import := .Values.import.enabled }}
- apiGroups: [""]
  resources: ["services"]
  verbs: {{ if $import }}["get", "list", "watch", "create", "update", "delete"]{{ else }}["get", "list", "watch"]{{ end }}
- apiGroups: ["multicluster.x-k8s.io"]
  resources: ["serviceexports"]
  verbs: ["get", "list", "watch", "update", "patch"]
- apiGroups: ["multicluster.x-k8s.io"]
  resources: ["serviceexports/status"]
  verbs: ["get", "update", "patch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: ["discovery.k8s.io"]
  resources: ["endpointslices"]
  verbs: {{ if $import }}["get", "list", "watch", "create", "update", "delete"]{{ else }}["get", "list", "watch"]{{ end }}
{{- if $import }}
- apiGroups: ["multicluster.x-k8s.io"]
  resources: ["serviceimports"]
  verbs: ["get", "list", "watch", "create", "update", "delete"]
- apiGroups: ["multicluster.x-k8s.io"]
  resources: ["serviceimports/status"]
  verbs: ["update"]
{{- end }}
{{- end }}

{{/*
Cluster-scoped reads of the import side, which no Role can grant: the Namespaces it imports
into (list and watch: a namespace created later receives its imports), and the ServiceImport
CRD (get: which optional spec fields the installed schema has, so a field an older CRD
prunes is not rewritten for ever). With watchNamespaces the agent lists each namespace by
a metadata.name field selector, which RBAC matches against resourceNames: the grant names
exactly the watched namespaces.
*/}}
{{- define "mcsync-agent.clusterRules" -}}
- apiGroups: [""]
  resources: ["namespaces"]
  {{- with .Values.watchNamespaces }}
  resourceNames: {{ toJson . }}
  {{- end }}
  verbs: ["list", "watch"]
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  resourceNames: ["serviceimports.multicluster.x-k8s.io"]
  verbs: ["get"]
{{- end }}

{{/*
Cluster-scoped identity (docs/reference.md#export-path, KEP-2149): read the About API's ClusterProperties
cluster.clusterset.k8s.io and clusterset.k8s.io, and create them where they are absent.
Never update or delete: an existing property is the cluster's, not the agent's. (RBAC
cannot limit create by name, so get is not limited either: ClusterProperties hold
identities, not secrets.) Granted whether or not this release installs the CRD, since
another tool may have.
*/}}
{{- define "mcsync-agent.identityRules" -}}
- apiGroups: ["about.k8s.io"]
  resources: ["clusterproperties"]
  # get/create: the cluster's id and clusterset; list/watch: every property, reported to
  # the hub for cluster selection (docs/reference.md#cluster-properties).
  verbs: ["get", "create", "list", "watch"]
{{- end }}

{{/* Refuse a release that cannot start, naming the value to set. */}}
{{- define "mcsync-agent.validate" -}}
{{- if not (or .Values.token.existingSecret .Values.token.value) }}
{{- fail "token.existingSecret (recommended) or token.value is required: the member token answered by POST /api/v1/clusters on the hub" }}
{{- end }}
{{- if and .Values.token.existingSecret .Values.token.value }}
{{- fail "set token.existingSecret or token.value, not both" }}
{{- end }}
{{- end }}
