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
