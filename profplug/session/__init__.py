"""Per-rank profiling session: bootstrap at interpreter start-up (sitecustomize)."""
