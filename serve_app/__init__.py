"""Ray Serve application: ingress, routes, service orchestration."""
