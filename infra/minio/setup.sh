#!/usr/bin/env bash
# Configure MinIO for bucket events from a Serve YAML's BucketRunner routes: their buckets, the webhook target (auth
# token + queue_dir) and one event rule per route and suffix. Idempotent: run it again after changing the routes.
#
#   PORTRAIT_EVENTS_TOKEN=... ./setup.sh ../../configs/your-config.yaml
#
# The work is `portrait buckets setup` (MinIO's own client library); this script only fills in the local defaults.
set -euo pipefail
CONFIG=${1:?usage: setup.sh SERVE_YAML (the routes to prepare)}
TOKEN=${PORTRAIT_EVENTS_TOKEN:?set PORTRAIT_EVENTS_TOKEN to the token the Serve app checks}
WEBHOOK_ENDPOINT=${WEBHOOK_ENDPOINT:-http://host.docker.internal:8000/v1/events/s3}   # as MinIO's container sees the app
exec portrait buckets setup "$CONFIG" --webhook-endpoint "$WEBHOOK_ENDPOINT" --token "$TOKEN" \
  --target-id "${TARGET_ID:-portrait}"
