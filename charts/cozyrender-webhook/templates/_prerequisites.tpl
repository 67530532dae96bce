{{- /* The prerequisites of the values given, checked against the cluster the release goes to
  (Helm's Capabilities and lookup). `helm template` has no cluster (lookup finds nothing), so it
  checks nothing: `default` exists in every cluster, and is how a live install is told apart. */}}
{{- define "cozyrender-webhook.prerequisites" -}}
{{- if lookup "v1" "Namespace" "" "default" }}
{{- $apis := .Capabilities.APIVersions }}
{{- if and .Values.tls.certManager (not .Values.clientConfig.caBundle) (not ($apis.Has "cert-manager.io/v1/Certificate")) }}
{{- fail "cozyrender-webhook: tls.certManager is true (the default) but this cluster serves no cert-manager.io/v1 Certificate: install cert-manager first (Cozystack ships it), or set tls.certManager=false with tls.secretName and tls.caBundle (an existing kubernetes.io/tls Secret and its CA)" }}
{{- end }}
{{- if and .Values.fluxInjection (not ($apis.Has "helm.toolkit.fluxcd.io/v2/HelmRelease")) }}
{{- fail "cozyrender-webhook: fluxInjection is true but this cluster serves no helm.toolkit.fluxcd.io/v2 HelmRelease: install Flux's helm-controller and its CRDs first, or leave fluxInjection false" }}
{{- end }}
{{- if and (eq .Values.networkPolicy.type "cilium") (not ($apis.Has "cilium.io/v2/CiliumNetworkPolicy")) }}
{{- fail "cozyrender-webhook: networkPolicy.type is cilium (the default; Cozystack runs Cilium) but this cluster serves no cilium.io/v2 CiliumNetworkPolicy: on a cluster without Cilium set networkPolicy.type=kubernetes with networkPolicy.apiServerCIDRs, or none" }}
{{- end }}
{{- if not ($apis.Has "apps.cozystack.io/v1alpha1/Tenant") }}
{{- fail "cozyrender-webhook: this cluster serves no apps.cozystack.io/v1alpha1 Tenant: the webhook checks Cozystack's tenants; install Cozystack (or its apps.cozystack.io API) first" }}
{{- end }}
{{- if not (lookup "v1" "Namespace" "" "tenant-root") }}
{{- fail "cozyrender-webhook: the namespace tenant-root does not exist: install cozystack-basics first (it creates tenant-root and its cozystack-values Secret, which the webhook reads)" }}
{{- end }}
{{- end }}
{{- end }}
