{{- define "cozyrender-webhook.labels" -}}
app.kubernetes.io/name: cozyrender-webhook
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "cozyrender-webhook.selector" -}}
app.kubernetes.io/name: cozyrender-webhook
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "cozyrender-webhook.tlsSecret" -}}
{{- if .Values.tls.certManager -}}{{ .Release.Name }}-tls{{- else -}}{{ required "tls.secretName is required when tls.certManager is false" .Values.tls.secretName }}{{- end -}}
{{- end }}

{{- define "cozyrender-webhook.controllerSelector" -}}
app.kubernetes.io/name: cozyrender-controller
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "cozyrender-webhook.controllerUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:cozyrender-controller
{{- end }}
