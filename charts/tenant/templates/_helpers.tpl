{{/*
The tenant's namespace. Release "tenant-<word>" in namespace P gives
"tenant-<word>" under tenant-root and "P-<word>" deeper: the chain of
ancestors is spelled in the name.
*/}}
{{- define "tenant.name" -}}
{{- $parts := splitList "-" .Release.Name -}}
{{- if or (ne (len $parts) 2) (ne (first $parts) "tenant") (eq (last $parts) "") -}}
{{- fail (printf "the release name must be \"tenant-<name>\" with no other dash, got %q" .Release.Name) -}}
{{- end -}}
{{- if not (hasPrefix "tenant-" .Release.Namespace) -}}
{{- fail (printf "the release namespace must start with \"tenant-\", got %q" .Release.Namespace) -}}
{{- end -}}
{{- if eq .Release.Namespace "tenant-root" -}}
{{- printf "tenant-%s" (last $parts) -}}
{{- else -}}
{{- printf "%s-%s" .Release.Namespace (last $parts) -}}
{{- end -}}
{{- end -}}

{{/*
A flag as the render inputs carry it: "true" or "false". Takes (list value
what); absent (nil) is "false"; anything but a bool or "true"/"false" fails.
*/}}
{{- define "tenant.flag" -}}
{{- $v := index . 0 -}}
{{- if or (eq (toString $v) "true") (eq (toString $v) "false") -}}
{{- toString $v -}}
{{- else if kindIs "invalid" $v -}}
false
{{- else -}}
{{- fail (printf "%s must be true or false, got %v" (index . 1) $v) -}}
{{- end -}}
{{- end -}}

{{/*
Ancestor labels tenant.cozystack.io/<ancestor>: "" for a tenant namespace:
always tenant-root, then every dash-prefix of the name, itself included.
*/}}
{{- define "tenant.ancestorLabels" -}}
{{- $parts := splitList "-" . -}}
tenant.cozystack.io/tenant-root: ""
{{- range $i, $_ := $parts }}
{{- if gt $i 0 }}
{{ printf "tenant.cozystack.io/%s: \"\"" (join "-" (slice $parts 0 (add1 $i))) }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
The tenant namespace and its ancestors, root first: tenant-root, tenant-a,
tenant-a-b ... (tenant-root only once when the tenant is the root).
*/}}
{{- define "tenant.chain" -}}
{{- $parts := splitList "-" . -}}
{{- $chain := list "tenant-root" -}}
{{- range $i, $_ := $parts }}
{{- $ns := join "-" (slice $parts 0 (add1 $i)) -}}
{{- if and (gt $i 0) (ne $ns "tenant-root") }}
{{- $chain = append $chain $ns -}}
{{- end }}
{{- end }}
{{- toJson $chain -}}
{{- end -}}

{{/*
Subjects of an access-level RoleBinding: for the tenant and each ancestor,
its ServiceAccount and the groups of this level and every level above it.
Takes (list level tenantNamespace).
*/}}
{{- define "tenant.subjects" -}}
{{- $level := index . 0 -}}
{{- $levels := list "view" "use" "admin" "super-admin" -}}
{{- $above := list -}}
{{- $seen := false -}}
{{- range $levels }}
{{- if eq . $level }}{{ $seen = true }}{{ end }}
{{- if $seen }}{{ $above = append $above . }}{{ end }}
{{- end }}
{{- range $t := include "tenant.chain" (index . 1) | fromJsonArray }}
- kind: ServiceAccount
  name: {{ $t }}
  namespace: {{ $t }}
{{- range $l := $above }}
- kind: Group
  name: {{ printf "%s-%s" $t $l }}
  apiGroup: rbac.authorization.k8s.io
{{- end }}
{{- end }}
{{- end -}}

{{/*
The quota's spec.hard, flattened: object counts and keys that already carry
requests./limits. stay as they are, storage is a request, any other resource
gets a request and a limit. No GPU rule lives here: budget keys flow through
like any other resource and the post-renderer takes them out.
*/}}
{{- define "tenant.quotaHard" -}}
{{- $counts := list "pods" "services" "services.loadbalancers" "services.nodeports" "services.clusterip" "configmaps" "secrets" "persistentvolumeclaims" "replicationcontrollers" "resourcequotas" -}}
{{- $out := dict -}}
{{- $from := dict -}}
{{- range $k, $v := . }}
{{- $keys := list -}}
{{- if or (has $k $counts) (hasPrefix "requests." $k) (hasPrefix "limits." $k) }}
{{- $keys = list $k -}}
{{- else if eq $k "storage" }}
{{- $keys = list "requests.storage" -}}
{{- else }}
{{- $keys = list (printf "requests.%s" $k) (printf "limits.%s" $k) -}}
{{- end }}
{{- range $key := $keys }}
{{- if hasKey $from $key }}
{{- fail (printf "resourceQuotas: %q and %q both set the quota key %q" (get $from $key) $k $key) -}}
{{- end }}
{{- $_ := set $from $key $k -}}
{{- $_ := set $out $key $v -}}
{{- end }}
{{- end }}
{{- toYaml $out -}}
{{- end -}}
