"""cozyrender: render-time GPU budget and vGPU entitlement rules for Cozystack tenants."""

__version__ = "0.2.0"
