"""The merged, annotated trace of a run (``--trace-out``): one Chrome Trace Event Format file
that Perfetto UI and chrome://tracing open (docs/html-and-compare.md, "The merged trace").

``writer`` streams the events out; ``tracks`` draws a Timeline's recorded GPU streams and host
threads in a rank's process; ``overlay`` draws profplug's own tracks and arrows from the
analyses' results; ``export`` puts one report (or two) together, with the metadata block.
"""
