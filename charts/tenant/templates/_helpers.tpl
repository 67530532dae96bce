{{/*
Helpers of the tenant chart. Each one states the rule it encodes and why.
The chart follows Cozystack's packages/apps/tenant at commit 3c780acd (same
objects, names and values); the GPU additions are the render inputs on the
Namespace, which the cozyrender post-renderer turns into the vGPU label.
*/}}

{{/*
tenant.name: the namespace this release creates.
Rule: the release is "tenant-<word>" (exactly one dash) installed in the
parent's namespace, which starts with "tenant-". Under tenant-root the
namespace is "tenant-<word>"; deeper it is "<parent namespace>-<word>", so a
namespace spells its whole chain of ancestors. Both the parent namespace and
the result must be DNS-1123 labels: Kubernetes refuses any other namespace
name, and a bad parent ("tenant-Root") would otherwise leak into the child's
name, labels and policies.
*/}}
{{- define "tenant.name" -}}
{{- $parts := splitList "-" .Release.Name -}}
{{- if or (ne (len $parts) 2) (ne (first $parts) "tenant") -}}
{{- fail (printf "the release name must be \"tenant-<name>\" with no other dash, got %q" .Release.Name) -}}
{{- end -}}
{{- if not (hasPrefix "tenant-" .Release.Namespace) -}}
{{- fail (printf "the release namespace must start with \"tenant-\", got %q" .Release.Namespace) -}}
{{- end -}}
{{- if not (include "tenant.isLabel" .Release.Namespace) -}}
{{- fail (printf "the release namespace %q is not a DNS-1123 label (at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit)" .Release.Namespace) -}}
{{- end -}}
{{- $name := printf "tenant-%s" (last $parts) -}}
{{- if ne .Release.Namespace "tenant-root" -}}
{{- $name = printf "%s-%s" .Release.Namespace (last $parts) -}}
{{- end -}}
{{- if not (include "tenant.isLabel" $name) -}}
{{- fail (printf "the tenant namespace %q (release %q in %q) is not a DNS-1123 label (at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit)" $name .Release.Name .Release.Namespace) -}}
{{- end -}}
{{- $name -}}
{{- end -}}

{{/*
tenant.isLabel: "true" when the argument is a DNS-1123 label, "" otherwise.
Rule: Kubernetes' namespace names (IsDNS1123Label): 1 to 63 characters,
lower-case alphanumerics and '-', alphanumeric at both ends.
*/}}
{{- define "tenant.isLabel" -}}
{{- if and (le (len .) 63) (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" .) -}}true{{- end -}}
{{- end -}}

{{/*
tenant.ancestorLabels: the `tenant.cozystack.io/<ancestor>: ""` labels of a
tenant namespace (the argument).
Rule: tenant-root is every tenant's ancestor; the others are the dash-prefixes
of the name with at least two words, the namespace itself included. The
<ancestor>-egress policy of every ancestor selects its descendants by these
labels, so they are derived from the name alone (no cluster lookup): the same
offline as in the cluster, whatever order parents and children reconcile in.
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
tenant.releaseChain: JSON list of the dash-prefixes of the release namespace
with at least two words ("tenant-a-b" gives ["tenant-a", "tenant-a-b"]).
Rule (Cozystack's, kept as is): the cozy:tenant RoleBinding and the
cluster-wide policies name these namespaces as the parent's side. For a
tenant two or more levels down the list does not reach tenant-root: that is
Cozystack's behaviour (the cozy:tenant binding adds tenant-root itself, the
policies do not), and the chart reproduces it so an upgrade changes nothing.
*/}}
{{- define "tenant.releaseChain" -}}
{{- $parts := splitList "-" .Release.Namespace -}}
{{- $chain := list -}}
{{- range $i, $_ := $parts }}
{{- if gt $i 0 }}
{{- $chain = append $chain (join "-" (slice $parts 0 (add1 $i))) -}}
{{- end }}
{{- end }}
{{- toJson $chain -}}
{{- end -}}

{{/*
tenant.accessTenants: JSON list of the tenants whose groups and
ServiceAccount get a tenant's access-level RoleBindings: the tenant and its
ancestors below tenant-root, shortest first, then tenant-root last (once).
Rule: a tenant's administrators administer every tenant below it.
*/}}
{{- define "tenant.accessTenants" -}}
{{- $parts := splitList "-" . -}}
{{- $tenants := list -}}
{{- range $i, $_ := $parts }}
{{- if gt $i 0 }}
{{- $tenants = append $tenants (join "-" (slice $parts 0 (add1 $i))) -}}
{{- end }}
{{- end }}
{{- if ne . "tenant-root" }}
{{- $tenants = append $tenants "tenant-root" -}}
{{- end }}
{{- toJson $tenants -}}
{{- end -}}

{{/*
tenant.levelsFrom: JSON list of the access levels at or above the argument,
in name order (admin, super-admin, use, view), as Cozystack lists them.
Rule: the levels rank view < use < admin < super-admin, and a group of a
higher level holds every lower level's rights.
*/}}
{{- define "tenant.levelsFrom" -}}
{{- $rank := dict "view" 0 "use" 1 "admin" 2 "super-admin" 3 -}}
{{- $min := get $rank . -}}
{{- $levels := list -}}
{{- range $level := keys $rank | sortAlpha }}
{{- if ge (get $rank $level) $min }}
{{- $levels = append $levels $level -}}
{{- end }}
{{- end }}
{{- toJson $levels -}}
{{- end -}}

{{/*
tenant.accessSubjects: the subjects of a tenant's RoleBinding for one access
level. Takes (list level tenantNamespace).
Rule: for every tenant of tenant.accessTenants, its ServiceAccount and its
groups "<tenant>-<level>" of this level and every level above it.
*/}}
{{- define "tenant.accessSubjects" -}}
{{- $levels := include "tenant.levelsFrom" (index . 0) | fromJsonArray -}}
{{- range $t := include "tenant.accessTenants" (index . 1) | fromJsonArray }}
- kind: ServiceAccount
  name: {{ $t }}
  namespace: {{ $t }}
{{- range $l := $levels }}
- kind: Group
  name: {{ printf "%s-%s" $t $l }}
  apiGroup: rbac.authorization.k8s.io
{{- end }}
{{- end }}
{{- end -}}

{{/*
tenant.ownsGateway: "true" when this tenant runs its own Gateway, else "false".
Rule: only an explicit `gateway: true` gives a tenant its own Gateway;
`false` and an absent key (the default) both mean the tenant publishes through
the nearest ancestor's Gateway (_namespace.gateway). An absent key is how
"unset" is spelled, so custom-apex tenants must opt in deliberately.
*/}}
{{- define "tenant.ownsGateway" -}}
{{- if and (not (kindIs "invalid" .Values.gateway)) .Values.gateway -}}true{{- else -}}false{{- end -}}
{{- end -}}

{{/*
tenant.namespaceValues: JSON of the tenant's `_namespace` values (what its
Namespace labels say and its cozystack-values Secret hands to every app in it).
Rule: etcd, ingress, monitoring and seaweedfs name the nearest namespace
(this one or an ancestor) that runs the service: this tenant's name when its
switch is on, else the parent's value. gateway likewise, switched by
tenant.ownsGateway. host is `host` when set, else "<word>.<parent host>" when
the parent has a host, else "". schedulingClass is the parent's when it has
one (a child cannot escape its parent's class), else the tenant's own.
*/}}
{{- define "tenant.namespaceValues" -}}
{{- $name := include "tenant.name" . -}}
{{- $parent := .Values._namespace | default dict -}}
{{- $out := dict -}}
{{- range $service := list "etcd" "ingress" "monitoring" "seaweedfs" }}
{{- $value := get $parent $service | default "" -}}
{{- if get $.Values $service }}{{ $value = $name }}{{ end -}}
{{- $_ := set $out $service $value -}}
{{- end }}
{{- $gateway := $parent.gateway | default "" -}}
{{- if eq (include "tenant.ownsGateway" .) "true" }}{{ $gateway = $name }}{{ end -}}
{{- $_ := set $out "gateway" $gateway -}}
{{- $host := "" -}}
{{- if .Values.host -}}
{{- $host = .Values.host -}}
{{- else if $parent.host -}}
{{- $host = printf "%s.%s" (splitList "-" $name | last) $parent.host -}}
{{- end -}}
{{- $_ := set $out "host" $host -}}
{{- $class := $parent.schedulingClass | default "" -}}
{{- if and (not $class) .Values.schedulingClass }}{{ $class = .Values.schedulingClass }}{{ end -}}
{{- $_ := set $out "schedulingClass" $class -}}
{{- toJson $out -}}
{{- end -}}

{{/*
tenant.flag: a render-input flag, "true" or "false". Takes (list value what).
Rule: true/false or "true"/"false"; absent is "false"; anything else fails,
naming the value, so the post-renderer never sees a third state.
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
tenant.ratio: an allocation ratio from _cluster, as a number (text).
Takes (list root key default).
Rule: the platform over-commits cpu, memory and ephemeral storage by these
ratios (defaults 10, 1 and 40; `_cluster.<key>` overrides). A ratio must be a
positive number: zero or a word would divide by zero (Cozystack fails with
"decimal division by 0") and a negative ratio gives negative requests the API
server refuses, so both stop the render with the key named.
*/}}
{{- define "tenant.ratio" -}}
{{- $root := index . 0 -}}
{{- $key := index . 1 -}}
{{- $cluster := $root.Values._cluster | default dict -}}
{{- $raw := index . 2 -}}
{{- if hasKey $cluster $key }}{{ $raw = toString (get $cluster $key) }}{{ end -}}
{{- if not (regexMatch "^[+]?([0-9]+([.][0-9]*)?|[.][0-9]+)([eE][-+]?[0-9]+)?$" $raw) -}}
{{- fail (printf "_cluster.%s must be a positive number, got %q" $key $raw) -}}
{{- end -}}
{{- if le (float64 $raw) 0.0 -}}
{{- fail (printf "_cluster.%s must be a positive number, got %q" $key $raw) -}}
{{- end -}}
{{- $raw -}}
{{- end -}}

{{/*
tenant.quantityNumber: a Kubernetes quantity as a plain number (text).
Rule: the suffix is a power of 1024 (Ki..Ei) or of 1000 (n, u, m, k..E); the
rest is read as a decimal number. The multiplication is Sprig's decimal
`mulf`, as Cozystack computes it, so requests come out digit for digit the
same.
*/}}
{{- define "tenant.quantityNumber" -}}
{{- $number := toString . -}}
{{- $unit := 1.0 -}}
{{- if kindIs "string" . -}}
{{- $binary := dict "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 -}}
{{- $decimal := dict "n" 1e-9 "u" 1e-6 "m" 1e-3 "k" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "P" 1e15 "E" 1e18 -}}
{{- $two := "" -}}
{{- if gt (len .) 2 }}{{ $two = substr (int (sub (len .) 2)) (len .) . }}{{ end -}}
{{- $one := "" -}}
{{- if gt (len .) 1 }}{{ $one = substr (int (sub (len .) 1)) (len .) . }}{{ end -}}
{{- if hasKey $binary $two -}}
{{- $number = trimSuffix $two . -}}
{{- $unit = get $binary $two -}}
{{- else if hasKey $decimal $one -}}
{{- $number = trimSuffix $one . -}}
{{- $unit = get $decimal $one -}}
{{- end -}}
{{- end -}}
{{- mulf (float64 $number) $unit | toString -}}
{{- end -}}

{{/*
tenant.quotaHard: the ResourceQuota's spec.hard for .Values.resourceQuotas.
Rules (Cozystack's):
- object counts (pods, services, ..., resourcequotas) are kept as written;
- storage becomes requests.storage only;
- cpu, memory and ephemeral-storage become a limit (the value, as text) and
  a request: the value divided by the allocation ratio (tenant.ratio, read
  only for a resource the quota holds, as Cozystack reads it); cpu
  stays fractional, memory and ephemeral storage are cut to whole bytes
  (refused past 2^63 bytes, where Cozystack's output wraps to a negative);
- any other key becomes requests.<key> and limits.<key> with the value as
  written, also a key already spelled requests.X or limits.X (which thus
  becomes requests.requests.X and limits.requests.X, as Cozystack renders it);
- a key `limits` or `requests` (a nested section) stops the render, as
  Cozystack's chart stops it.
GPU budget keys are "any other key" here: the chart has no GPU rule, the
post-renderer removes them from the quota.
*/}}
{{- define "tenant.quotaHard" -}}
{{- /* A flat map of resource names: `limits:`/`requests:` sections (or keys) are refused, as
       Cozystack's chart refuses them, instead of rendering limits.limits. */ -}}
{{- range $section := list "limits" "requests" }}
{{- if hasKey $.Values.resourceQuotas $section }}
{{- fail (printf "resourceQuotas.%s: resourceQuotas maps resource names to quantities (cpu: 2, storage: 10Gi); %s is not a resource name, and the chart derives limits and requests itself" $section $section) -}}
{{- end }}
{{- end }}
{{- $counts := list "pods" "services" "services.loadbalancers" "services.nodeports" "services.clusterip" "configmaps" "secrets" "persistentvolumeclaims" "replicationcontrollers" "resourcequotas" -}}
{{- /* Each ratio is read only when its resource is in the quota: Cozystack
       divides by a ratio only then, so a bad ratio for a resource the tenant
       does not limit stops nothing. */ -}}
{{- $ratios := dict "cpu" (list "cpu-allocation-ratio" "10") "memory" (list "memory-allocation-ratio" "1")
      "ephemeral-storage" (list "ephemeral-storage-allocation-ratio" "40") -}}
{{- $hard := dict -}}
{{- range $key, $value := .Values.resourceQuotas }}
{{- if has $key $counts }}
{{- $_ := set $hard $key $value -}}
{{- else if eq $key "storage" }}
{{- $_ := set $hard "requests.storage" $value -}}
{{- else if hasKey $ratios $key }}
{{- $ratio := include "tenant.ratio" (prepend (get $ratios $key) $) -}}
{{- $request := divf (include "tenant.quantityNumber" $value | float64) ($ratio | float64) -}}
{{- if ne $key "cpu" -}}
{{- /* Whole bytes as a 64-bit integer: past 2^63 the conversion wraps to a
       negative number (Cozystack renders -9223372036854775808 for 9Ei),
       which no quota can hold, so such a request stops the render. */ -}}
{{- if or (ge $request 9223372036854775807.0) (le $request -9223372036854775808.0) -}}
{{- fail (printf "resourceQuotas.%s: the request %v / %s does not fit a 64-bit quantity of bytes" $key $value $ratio) -}}
{{- end -}}
{{- $request = int $request -}}
{{- end -}}
{{- $_ := set $hard (printf "requests.%s" $key) (toString $request) -}}
{{- $_ := set $hard (printf "limits.%s" $key) (toString $value) -}}
{{- else }}
{{- $_ := set $hard (printf "requests.%s" $key) $value -}}
{{- $_ := set $hard (printf "limits.%s" $key) $value -}}
{{- end }}
{{- end }}
{{- toYaml $hard -}}
{{- end -}}

{{/*
tenant.moduleRelease: the Flux HelmRelease of one tenant module (info, etcd,
ingress, ...). Takes a dict: root, name, kind, artifact, timeout, and the
booleans retry and gated.
Rules: a module is a HelmRelease named after the module in the tenant
namespace, labelled as a tenant module of the "tenants" shard (the cleanup
hook deletes applications first, modules second, by these labels), built from
the platform's ExternalArtifact and the tenant's cozystack-values Secret, and
retried without end. `retry` (modules owning data or accounts: etcd,
monitoring, seaweedfs, gateway) uses the RetryOnFailure strategy on install
and upgrade, so a failed install is retried in place instead of being
remediated by an uninstall whose cleanup hooks would destroy the data.
`gated` (modules whose objects pass the victoria-metrics-operator webhook:
etcd, ingress, monitoring) waits for that operator's HelmRelease.
*/}}
{{- define "tenant.moduleRelease" -}}
{{- $root := .root -}}
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: {{ .name }}
  namespace: {{ include "tenant.name" $root }}
  labels:
    sharding.fluxcd.io/key: tenants
    internal.cozystack.io/tenantmodule: "true"
    app.kubernetes.io/instance: {{ $root.Release.Name }}
    app.kubernetes.io/managed-by: {{ $root.Release.Service }}
    apps.cozystack.io/application.kind: {{ .kind }}
    apps.cozystack.io/application.group: apps.cozystack.io
    apps.cozystack.io/application.name: {{ .name }}
spec:
  {{- if .gated }}
  dependsOn:
    - name: victoria-metrics-operator
      namespace: cozy-victoria-metrics-operator
  {{- end }}
  chartRef:
    kind: ExternalArtifact
    name: {{ .artifact }}
    namespace: cozy-system
  interval: 5m
  timeout: {{ .timeout }}
  {{- range $action := list "install" "upgrade" }}
  {{ $action }}:
    {{- if $.retry }}
    strategy:
      name: RetryOnFailure
      retryInterval: 30s
    {{- end }}
    remediation:
      retries: -1
  {{- end }}
  valuesFrom:
    - kind: Secret
      name: cozystack-values
{{- end -}}

{{/*
tenant.hookAnnotations: the annotations of the pre-delete cleanup hook's
objects. Takes the hook weight (text).
Rule: the objects exist only while `helm uninstall` runs: created before the
release's objects are deleted (ServiceAccount and RBAC at weight -5, before the
Job at 0), replaced when a previous attempt left them, deleted on success.
*/}}
{{- define "tenant.hookAnnotations" -}}
helm.sh/hook: pre-delete
helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
helm.sh/hook-weight: {{ . | quote }}
{{- end -}}

{{/*
tenant.cleanupScript: the cleanup hook's shell script for one namespace.
Rule: applications (HelmReleases with an application kind that are not tenant
modules) go first and tenant modules second, because applications run on the
modules; each wave waits at most 90s (kubectl's default wait is a week) and
`set -e` ends the run on a wave that did not finish. The text is Cozystack's
script without its comments, so the Job's command is the same program.
*/}}
{{- define "tenant.cleanupScript" -}}
set -e
NAMESPACE="{{ . }}"

echo "Cleaning up HelmReleases in namespace: $NAMESPACE"

echo "Deleting Applications"
kubectl delete helmreleases.helm.toolkit.fluxcd.io -n "$NAMESPACE" \
  -l 'apps.cozystack.io/application.kind,internal.cozystack.io/tenantmodule!=true' \
  --ignore-not-found=true --wait=true --timeout=90s

echo "Deleting Tenant Modules"
kubectl delete helmreleases.helm.toolkit.fluxcd.io -n "$NAMESPACE" \
  -l 'apps.cozystack.io/application.kind,internal.cozystack.io/tenantmodule=true' \
  --ignore-not-found=true --wait=true --timeout=90s

echo "Cleanup completed successfully"
{{- end -}}
