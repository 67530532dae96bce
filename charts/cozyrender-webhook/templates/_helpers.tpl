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

{{- /*
  One reading of the image, the pods' metadata and their scheduling for every
  Deployment of the chart (the webhook's and the controller's alike: a value
  that reached one Deployment only left the controller unable to reach the API
  server on a node where the `kubernetes` Service is not routed).
  Called with (dict "root" $ "selector" "<the selector's template name>").
*/}}
{{- define "cozyrender-webhook.image" -}}
{{- if .Values.imageDigest -}}
{{- if not (regexMatch "^sha256:[a-f0-9]{64}$" .Values.imageDigest) -}}
{{- fail (printf "imageDigest %q: expected sha256:<64 lowercase hex digits>" .Values.imageDigest) -}}
{{- end -}}
{{ printf "%s@%s" .Values.image .Values.imageDigest }}
{{- else -}}
{{ .Values.image }}
{{- end -}}
{{- end }}

{{- define "cozyrender-webhook.podMetadata" -}}
{{- $selector := include .selector .root | fromYaml }}
{{- range $key, $value := .root.Values.podLabels }}
{{- if hasKey $selector $key }}
{{- fail (printf "podLabels.%s: the pods' selector sets this label" $key) }}
{{- end }}
{{- end }}
labels:
  {{- toYaml (merge (dict) $selector .root.Values.podLabels) | nindent 2 }}
{{- with .root.Values.podAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "cozyrender-webhook.podScheduling" -}}
{{- $values := .root.Values }}
{{- $selector := include .selector .root | fromYaml }}
{{- with $values.priorityClassName }}
priorityClassName: {{ . | quote }}
{{- end }}
{{- with $values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if eq $values.antiAffinity "required" }}
affinity:
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- toYaml $selector | nindent 12 }}
{{- else if eq $values.antiAffinity "preferred" }}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- toYaml $selector | nindent 14 }}
{{- end }}
{{- with $values.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- range $constraint := . }}
  {{- $constraint = deepCopy $constraint }}
  {{- if not (hasKey $constraint "labelSelector") }}
  {{- $_ := set $constraint "labelSelector" (dict "matchLabels" $selector) }}
  {{- end }}
  - {{- toYaml $constraint | nindent 4 }}
  {{- end }}
{{- end }}
{{- with $values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "cozyrender-webhook.preStop" -}}
lifecycle:
  preStop:
    sleep:
      seconds: {{ . }}
{{- end }}
