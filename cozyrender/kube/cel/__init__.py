"""Kubernetes' CEL, offline: the environment the API server compiles CRD
`x-kubernetes-validations` rules in (`environment`), its libraries
(`quantity`, `strings`, `lists`, `net`, `semver`), `self` typed from the
schema (`types`), values converted as the API server converts them
(`values`), the API server's compile-time checks (`validators`), and DRA
DeviceClass selectors on a device as the scheduler evaluates them (`devices`)."""
