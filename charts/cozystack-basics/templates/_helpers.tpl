{{/*
A flag as the render inputs carry it: "true" or "false". Takes (list value
what); absent (nil) is "false"; anything but a bool or "true"/"false" fails.
*/}}
{{- define "basics.flag" -}}
{{- $v := index . 0 -}}
{{- if or (eq (toString $v) "true") (eq (toString $v) "false") -}}
{{- toString $v -}}
{{- else if kindIs "invalid" $v -}}
false
{{- else -}}
{{- fail (printf "%s must be true or false, got %v" (index . 1) $v) -}}
{{- end -}}
{{- end -}}
