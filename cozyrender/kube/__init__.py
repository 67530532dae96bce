"""Kubernetes semantics the rules depend on, as pure functions: quantities,
effective pod resources, node eligibility."""
