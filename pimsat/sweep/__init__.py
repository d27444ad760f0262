"""`pimsat sweep`: hardware and program co-design sweeps on Dask (spec.py: axes, points, checks;
run.py: evaluate one point, the results store, the driver; report.py: CSV, sensitivity, HTML;
plots.py: matplotlib figures; outputs.py: what a finished sweep writes)."""
