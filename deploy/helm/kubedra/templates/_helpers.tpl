{{/* Names and labels shared by every template. */}}

{{- define "kubedra.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- define "kubedra.labels" -}}
app.kubernetes.io/name: kubedra
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end }}

{{- define "kubedra.driverAccount" -}}{{ .Release.Name }}-driver{{- end }}
{{- define "kubedra.schedulerAccount" -}}{{ .Release.Name }}-scheduler{{- end }}

{{/* A driver name (a DNS subdomain) as part of an object name: dots become dashes. */}}
{{- define "kubedra.driverSuffix" -}}{{ . | replace "." "-" | trunc 40 | trimSuffix "-" }}{{- end }}
