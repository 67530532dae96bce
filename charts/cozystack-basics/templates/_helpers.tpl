{{/*
basics.requireCluster: nothing, or a render failure when `_cluster` is not a map.
Rule: `_cluster` must be a map. Cozystack's chart indexes it directly, so a
null, string or list `_cluster` aborts its render; failing here with a clear
message keeps "upstream refuses, we refuse" (the schema catches most of these
first; this guards renders that bypass it).
*/}}
{{- define "basics.requireCluster" -}}
{{- $c := .Values._cluster -}}
{{- if not (kindIs "map" $c) -}}
{{- fail (printf "_cluster must be a map of platform values, got %s" (ternary "null" (kindOf $c) (kindIs "invalid" $c))) -}}
{{- end -}}
{{- end -}}

{{/*
basics.rootHost: `_cluster.root-host` quoted exactly as Cozystack emits it.
Rule: the value goes through `quote` untouched, so an absent or null root-host
yields an empty scalar (YAML null) and a number becomes its string. Cozystack's
objects carry a null host in that case; parity means we do too.
Takes the root context.
*/}}
{{- define "basics.rootHost" -}}
{{- index .Values._cluster "root-host" | quote -}}
{{- end -}}

{{/*
basics.switchOn: is a `_cluster` on/off switch on? Takes (list cluster key fallback).
Rule: the platform writes switches as the strings "true"/"false", operators
using --set may write bools; both compare as strings. An absent or empty value
(including a bool false, which sprig's `default` treats as empty) takes the
fallback, so `monitoring-enabled: false` keeps the default "true" exactly as in
Cozystack's chart. Prints "true" or nothing.
*/}}
{{- define "basics.switchOn" -}}
{{- $value := index (index . 0) (index . 1) | default (index . 2) -}}
{{- if eq (toString $value) "true" -}}true{{- end -}}
{{- end -}}

{{/*
basics.flag: a flag as the render inputs carry it: "true" or "false". Takes
(list value what).
Rule: absent (nil) is "false"; a bool or "true"/"false" is itself; anything
else fails the render, because the post-renderer would refuse the input anyway
and a typo must not silently mean "off".
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

{{/*
basics.vapServed: prints "true" when the cluster serves the
ValidatingAdmissionPolicy API.
Rule: the hostname policies are only rendered where
admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy exists (GA in
Kubernetes 1.30); elsewhere the objects could not be applied. Helm's default
capability set for `helm template` includes it.
*/}}
{{- define "basics.vapServed" -}}
{{- if .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy" -}}true{{- end -}}
{{- end -}}

{{/*
basics.managedLabels: the label every platform-managed policy object carries,
so Cozystack's tooling recognises it as its own.
*/}}
{{- define "basics.managedLabels" -}}
internal.cozystack.io/managed-by-cozystack: ""
{{- end -}}

{{/*
basics.policyBinding: a Deny binding for one policy. Takes the policy name.
Rule: every hostname policy is enforced (validationActions Deny), never only
audited or warned, so a violating object is refused at admission.
*/}}
{{- define "basics.policyBinding" -}}
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {{ . }}
  labels:
    {{- include "basics.managedLabels" . | nindent 4 }}
spec:
  policyName: {{ . }}
  validationActions:
    - Deny
{{- end -}}

{{/*
basics.hostLabel: the CEL access to the namespace's apex, the
namespace.cozystack.io/host label of the object's namespace.
*/}}
{{- define "basics.hostLabel" -}}
namespaceObject.metadata.labels["namespace.cozystack.io/host"]
{{- end -}}

{{/*
basics.noHostLabel: CEL that is true when the namespace has no apex label.
Rule: the route and ingress policies fail closed: a tenant namespace without
its host label gets `false` (deny), so a missing label never opens publishing.
namespaceObject is a top-level variable, so it is compared with null before
has() walks into its labels.
*/}}
{{- define "basics.noHostLabel" -}}
(namespaceObject == null || !has(namespaceObject.metadata.labels) || !("namespace.cozystack.io/host" in namespaceObject.metadata.labels))
{{- end -}}

{{/*
basics.inApex: CEL that is true when a hostname equals the namespace apex or
is a subdomain of it. Takes the CEL expression naming the hostname.
Rule: both operands are lower-cased: hostnames are lower case by API
validation, but a label value may carry upper case.
*/}}
{{- define "basics.inApex" -}}
{{- $apex := include "basics.hostLabel" . -}}
{{- printf "%s.lowerAscii() == %s.lowerAscii() || %s.lowerAscii().endsWith(\".\" + %s.lowerAscii())" . $apex . $apex -}}
{{- end -}}

{{/*
basics.ingressHostAllowed: CEL for one Ingress hostname. Takes (list host rootHost).
Rule: a host is allowed inside the namespace apex, or when it is a concrete
(non-wildcard) name entirely outside the platform root apex: a tenant may
route its own external domain, never another tenant's or the platform's name,
and never a wildcard that could cover the root apex. The root apex literal is
Go-quoted into the CEL string and lower-cased like the other operand.
*/}}
{{- define "basics.ingressHostAllowed" -}}
{{- $h := index . 0 -}}
{{- $root := index . 1 -}}
{{- printf "(%s || (!%s.lowerAscii().startsWith(\"*.\") && !(%s.lowerAscii() == %q.lowerAscii() || %s.lowerAscii().endsWith(%q.lowerAscii()))))" (include "basics.inApex" $h) $h $h $root $h (printf ".%s" $root) -}}
{{- end -}}

{{/*
basics.trustedCaller: CEL that is true when the request comes from a cluster
admin or one of the platform's own service-account groups.
Rule: only these may set or change a tenant's host (the apex is an
authorisation boundary); the group list is Cozystack's.
*/}}
{{- define "basics.trustedCaller" -}}
{{- $groups := list "system:masters" "system:serviceaccounts:cozy-system" "system:serviceaccounts:cozy-cert-manager" "system:serviceaccounts:cozy-fluxcd" "system:serviceaccounts:kube-system" -}}
{{- $checks := list -}}
{{- range $groups -}}
{{- $checks = append $checks (printf "g == %q" .) -}}
{{- end -}}
{{- printf "has(request.userInfo.groups) && request.userInfo.groups.exists(g,\n  %s)" (join " ||\n  " $checks) -}}
{{- end -}}
