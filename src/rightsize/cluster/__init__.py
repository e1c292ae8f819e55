"""Scale out on Ray: measurement sweeps on real heterogeneous nodes, batch inference pipelines.

    from rightsize.cluster.bench import run_sweep_on_ray       # `rightsize bench SPEC --ray auto`
    from rightsize.cluster.pipeline import run_pipeline         # `rightsize pipeline SPEC [--ray auto]`

Nothing here is needed for local use: importing this package imports neither ray nor torch; each
module imports ray inside the functions that talk to a cluster (``session.import_ray``). The local
pipeline (``--ray`` not given) runs on plain multiprocessing. See docs/cluster.md.
"""
