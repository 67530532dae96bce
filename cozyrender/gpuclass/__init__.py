"""GPU classes: the GPUClass CRD's rules checked offline, free units (DRA
devices included), class conflicts and the catalog. Pure functions over objects as the API returns them."""
