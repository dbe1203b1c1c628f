"""The two-node fault test's parts (``python -m bench.cluster_fault`` runs them): the cluster, the deployment,
the load, and the run that measures it."""
