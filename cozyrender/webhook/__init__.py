"""The in-cluster admission webhook: the GPU budget rules of `cozyrender
check`, enforced where tenants write, race-safe across replicas.

- `admission`: AdmissionReview v1 in, the answer `check` gives out (pure);
- `cache`: list+watch of everything `check` reads, feeding a LiveIndex;
- `ledger`: reservations of admitted growing writes, compare-and-swapped in
  one ConfigMap, so the API server arbitrates between replicas;
- `server`: HTTPS, `/validate`, `/healthz`, `/readyz`, `/metrics`;
- `metrics`: the Prometheus metrics.

The `cozyrender webhook` command (cozyrender/commands/webhook.py) wires them.
"""
