"""A nested package for the ``--step-fn`` module-shape tests (CPU test job)."""
