{{/* Chart name, truncated to the 63 characters Kubernetes allows in a label. */}}
{{- define "mcsync-hub.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name of the release's objects. */}}
{{- define "mcsync-hub.fullname" -}}
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

{{- define "mcsync-hub.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object, without the component (each object names its own). */}}
{{- define "mcsync-hub.commonLabels" -}}
helm.sh/chart: {{ include "mcsync-hub.chart" . }}
app.kubernetes.io/name: {{ include "mcsync-hub.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: mcsync
{{- end }}

{{/* Labels of the hub's own objects. */}}
{{- define "mcsync-hub.labels" -}}
{{ include "mcsync-hub.commonLabels" . }}
app.kubernetes.io/component: hub
{{- end }}

{{- define "mcsync-hub.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mcsync-hub.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: hub
{{- end }}

{{- define "mcsync-hub.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "mcsync-hub.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "mcsync-hub.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
The database the hub uses: database.type when set, else derived from what was given —
PostgreSQL when a URL of it, an existing Secret or the bundled trial database is configured,
SQLite on the chart's volume when nothing is (so `helm install` with no values gives a
working single-replica hub, the embedded default of docs/reference.md#flags).
*/}}
{{- define "mcsync-hub.databaseType" -}}
{{- $db := .Values.database }}
{{- if $db.type }}{{ $db.type }}
{{- else if or .Values.postgresql.enabled $db.existingSecret (hasPrefix "postgres" $db.url) }}postgresql
{{- else }}sqlite
{{- end }}
{{- end }}

{{/* "true" when the hub stores its data in SQLite. */}}
{{- define "mcsync-hub.sqlite" -}}
{{- if eq (include "mcsync-hub.databaseType" .) "sqlite" }}true{{ end }}
{{- end }}

{{/* The SQLite URL: the one given, else a file on the chart's volume. */}}
{{- define "mcsync-hub.sqliteURL" -}}
{{- default (printf "sqlite:///%s/mcsync.db" (trimSuffix "/" .Values.persistence.mountPath)) .Values.database.url }}
{{- end }}

{{/*
"true" when a hook Job runs the migrations. Never with SQLite: the file lives on a
ReadWriteOnce volume that the hook (run before the volume's claim exists on install) could
not share with the hub pod, and a single replica can migrate safely at start.
*/}}
{{- define "mcsync-hub.migrationJob" -}}
{{- if and .Values.migrations.job.enabled (not (include "mcsync-hub.sqlite" .)) }}true{{ end }}
{{- end }}

{{/*
Hook events of the migration Job. pre-install normally, so no hub pod ever serves an old
schema; post-install with the bundled PostgreSQL, which (a normal release object) does not
exist yet when pre-install hooks run. Upgrades always migrate first.
*/}}
{{- define "mcsync-hub.migrationHook" -}}
{{- if .Values.postgresql.enabled }}post-install,pre-upgrade{{ else }}pre-install,pre-upgrade{{ end }}
{{- end }}

{{- define "mcsync-hub.secretName" -}}
{{- include "mcsync-hub.fullname" . }}
{{- end }}

{{- define "mcsync-hub.postgresqlName" -}}
{{- printf "%s-postgresql" (include "mcsync-hub.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Secret and key of the database URL. */}}
{{- define "mcsync-hub.databaseSecretName" -}}
{{- default (include "mcsync-hub.secretName" .) .Values.database.existingSecret }}
{{- end }}
{{- define "mcsync-hub.databaseSecretKey" -}}
{{- if .Values.database.existingSecret }}{{ .Values.database.existingSecretKey }}{{ else }}database-url{{ end }}
{{- end }}

{{/* Secret and keys of the bearer tokens. */}}
{{- define "mcsync-hub.authSecretName" -}}
{{- default (include "mcsync-hub.secretName" .) .Values.auth.existingSecret }}
{{- end }}
{{- define "mcsync-hub.adminTokenKey" -}}
{{- if .Values.auth.existingSecret }}{{ .Values.auth.adminTokenKey }}{{ else }}admin-token{{ end }}
{{- end }}
{{- define "mcsync-hub.readerTokenKey" -}}
{{- if .Values.auth.existingSecret }}{{ .Values.auth.readerTokenKey }}{{ else }}reader-token{{ end }}
{{- end }}

{{/* "true" when the chart must make its own Secret (something is not in an existing one). */}}
{{- define "mcsync-hub.chartSecret" -}}
{{- if or (not .Values.database.existingSecret) (not .Values.auth.existingSecret) }}true{{ end }}
{{- end }}

{{/*
A value kept across upgrades: the one in the release's live Secret when there is one
(lookup answers nothing under `helm template`), else the given value, else a new random one.
Call with (dict "ctx" $ "key" "admin-token" "value" .Values.auth.adminToken).
*/}}
{{- define "mcsync-hub.persistentSecretValue" -}}
{{- $ctx := .ctx }}
{{- if .value }}
{{- .value }}
{{- else }}
{{- $existing := lookup "v1" "Secret" $ctx.Release.Namespace (include "mcsync-hub.secretName" $ctx) }}
{{- if and $existing (hasKey $existing.data .key) }}
{{- index $existing.data .key | b64dec }}
{{- else }}
{{- randAlphaNum 40 }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Refuse database settings that cannot work, with a message naming the value to change.
values.schema.json covers what JSON Schema can say; these need string tests.
*/}}
{{- define "mcsync-hub.validate" -}}
{{- $db := .Values.database }}
{{- $type := include "mcsync-hub.databaseType" . }}
{{- if .Values.postgresql.enabled }}
  {{- if eq $type "sqlite" }}
    {{- fail "database.type=sqlite cannot be combined with postgresql.enabled=true" }}
  {{- end }}
  {{- if or $db.url $db.existingSecret }}
    {{- fail "postgresql.enabled=true makes its own database URL: leave database.url and database.existingSecret empty" }}
  {{- end }}
{{- else if eq $type "postgresql" }}
  {{- if not (or $db.url $db.existingSecret) }}
    {{- fail "database.url or database.existingSecret is required with database.type=postgresql (or set postgresql.enabled=true for a trial database)" }}
  {{- end }}
{{- end }}
{{- if and $db.url (not $db.existingSecret) }}
  {{- if hasPrefix "sqlite" $db.url }}
    {{- if ne $type "sqlite" }}
      {{- fail "database.url is a SQLite URL: set database.type=sqlite (one replica, persistence.enabled=true)" }}
    {{- end }}
    {{- if not (contains (printf "//%s/" (trimSuffix "/" .Values.persistence.mountPath)) $db.url) }}
      {{- fail (printf "database.url must put the SQLite file under persistence.mountPath (%s), e.g. sqlite:///%s/mcsync.db: the root filesystem is read-only" .Values.persistence.mountPath (trimSuffix "/" .Values.persistence.mountPath)) }}
    {{- end }}
  {{- else if not (hasPrefix "postgres" $db.url) }}
    {{- fail "database.url must start with postgresql:// or sqlite://" }}
  {{- else if eq $type "sqlite" }}
    {{- fail "database.type=sqlite but database.url is a PostgreSQL URL" }}
  {{- end }}
{{- end }}
{{- if eq $type "sqlite" }}
  {{- if ne (int .Values.replicaCount) 1 }}
    {{- fail "replicaCount > 1 needs PostgreSQL (SQLite is one file on one volume): set database.url or database.existingSecret to a PostgreSQL database, or postgresql.enabled=true for a trial one" }}
  {{- end }}
  {{- if not .Values.persistence.enabled }}
    {{- fail "persistence.enabled=true is required with database.type=sqlite, or the data is lost with the pod" }}
  {{- end }}
{{- end }}
{{- end }}
