{{/* Chart name, at most 63 characters. */}}
{{- define "sample-provisioner.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: the release name, with the chart name unless it holds it. */}}
{{- define "sample-provisioner.fullname" -}}
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

{{- define "sample-provisioner.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "sample-provisioner.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sample-provisioner.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "sample-provisioner.labels" -}}
helm.sh/chart: {{ include "sample-provisioner.chart" . }}
{{ include "sample-provisioner.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: object-bucket-provisioner
{{- end }}

{{- define "sample-provisioner.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "sample-provisioner.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name: name the existing ServiceAccount to run as (serviceAccount.create is false)" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Lease: what the binary defaults to, named so that RBAC can limit it. */}}
{{- define "sample-provisioner.leaseName" -}}
{{- default (replace "/" "-" .Values.provisionerName) .Values.leaderElection.leaseName }}
{{- end }}

{{- define "sample-provisioner.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* Checks across values that the schema cannot express. */}}
{{- define "sample-provisioner.validate" -}}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.leaderElection.enabled) }}
{{- fail "replicaCount > 1 needs leaderElection.enabled: without it every replica would act" }}
{{- end }}
{{- if and (eq .Values.rbac.scope "namespaced") (empty .Values.watchNamespaces) }}
{{- fail "rbac.scope namespaced needs watchNamespaces: the namespaces whose claims are served" }}
{{- end }}
{{- if and (eq .Values.rbac.scope "namespaced") .Values.cosi.enabled }}
{{- fail "rbac.scope namespaced needs cosi.enabled=false: the COSI controllers watch every namespace, which a namespaced install does not grant" }}
{{- end }}
{{- if and .Values.cosi.exampleClasses.enabled (not .Values.cosi.enabled) }}
{{- fail "cosi.exampleClasses.enabled needs cosi.enabled: nothing would serve the example COSI classes" }}
{{- end }}
{{- if and .Values.exampleStorageClass.enabled (empty .Values.exampleStorageClass.endpoint) }}
{{- fail "exampleStorageClass.endpoint: set the root URL of the store's S3 API (exampleStorageClass.enabled is true)" }}
{{- end }}
{{- end }}
