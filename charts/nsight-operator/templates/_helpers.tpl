{{- define "nsight-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "nsight-operator.labels" -}}
app.kubernetes.io/name: nsight-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: nsight-operator
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{- define "nsight-operator.selector" -}}
app.kubernetes.io/name: nsight-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "nsight-operator.tag" -}}
{{- default .Chart.AppVersion .Values.image.tag -}}
{{- end -}}

{{/* The agent channel injected agents are given. */}}
{{- define "nsight-operator.coordinatorUrl" -}}
{{- if .Values.webhook.coordinatorUrl -}}
{{- .Values.webhook.coordinatorUrl -}}
{{- else if .Values.multiTenant.enabled -}}
https://nsight-operator-coordinator.{namespace}.svc:8081
{{- else if (index .Values "nsight-coordinator").enabled -}}
https://nsight-operator-coordinator.{{ .Release.Namespace }}.svc:8081
{{- end -}}
{{- end -}}

{{/* Labels of the control-plane resources the chart renders. */}}
{{- define "nsight-operator.crLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: nsight-operator
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{/* resources, nodeSelector and tolerations of a component's values, as spec fields. */}}
{{- define "nsight-operator.workload" -}}
{{- with .resources }}
resources:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* Whether the chart renders the single-tenant control plane. */}}
{{- define "nsight-operator.singleTenant" -}}
{{- if not .Values.multiTenant.enabled -}}true{{- end -}}
{{- end -}}

{{/* The webhook serves a certificate it does not issue (caBundle given, or cert-manager). */}}
{{- define "nsight-operator.ownWebhookCert" -}}
{{- if or .Values.webhook.caBundle .Values.webhook.certManager.enabled -}}true{{- end -}}
{{- end -}}

{{- define "nsight-operator.webhookCertSecret" -}}
{{- if .Values.webhook.certManager.enabled -}}
{{- default (printf "%s-webhook-cert" (include "nsight-operator.fullname" .)) .Values.webhook.tlsSecretName -}}
{{- else -}}
{{- required "webhook.tlsSecretName: the Secret with the certificate webhook.caBundle signed" .Values.webhook.tlsSecretName -}}
{{- end -}}
{{- end -}}
