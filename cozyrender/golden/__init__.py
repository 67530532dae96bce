"""Golden-file chart tests: render each case, compare with the expected files.

A case is a folder holding `case.yaml`:

    chart: charts/tenant      # relative to the case folder or any folder above it
    release: tenant-a
    namespace: tenant-root
    values: [values.yaml]     # values files in the case folder, merged in order
    set: ["gpu.vgpu=true"]    # optional, Helm --set syntax, applied last
    set_string: [...]         # optional, as --set-string; set_json: [...] as --set-json
    inline: {...}             # optional inline values, merged after the files
    parent: ../root           # optional: start from the values.yaml of the
                              # cozystack-values Secret that the parent case's
                              # post-rendered output puts in this release's
                              # namespace (what Flux's valuesFrom hands the chart)
    expect_error: "must be"   # optional: the render (or post-render) must fail
                              # with a message containing this; no expected files
    api_versions: [cozystack.io/v1alpha1/GPUClass]   # optional, as `helm template -a`
    kube_version: "1.35"      # optional, as `helm template --kube-version`

and the expected `raw.yaml` (Helm's output) and `rendered.yaml` (after the
post-renderer), each normalised: one document per object, ordered by
kind/namespace/name, so diffs are stable and name the object. Every rendered
manifest is validated offline against the Kubernetes schemas.
"""

from cozyrender.golden.cases import (
    CASE_FILE,
    EXPECTED_FILES,
    RAW_FILE,
    RENDERED_FILE,
    Case,
    CaseError,
    RenderFailure,
    did_you_mean,
    find_cases,
    find_stale,
    load_case,
)
from cozyrender.golden.normalise import diff_objects, format_normalised, normalise, normalise_objects
from cozyrender.golden.run import (
    CaseResult,
    GoldenReport,
    PostRender,
    default_post_render,
    run_golden,
    secret_values,
)

__all__ = [
    "CASE_FILE", "EXPECTED_FILES", "RAW_FILE", "RENDERED_FILE", "Case", "CaseError", "CaseResult",
    "GoldenReport", "PostRender", "RenderFailure", "default_post_render", "did_you_mean", "diff_objects",
    "find_cases", "find_stale", "format_normalised", "load_case", "normalise", "normalise_objects",
    "run_golden", "secret_values",
]
