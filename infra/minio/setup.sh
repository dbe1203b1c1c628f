#!/usr/bin/env bash
# Configure MinIO for bucket events: buckets, the webhook target (auth token + queue_dir), and one `mc event add`
# per route and suffix. Idempotent: run it again after changing the routes.
#
#   PORTRAIT_EVENTS_TOKEN=... ./setup.sh            # the same token the Serve app gets (PORTRAIT_EVENTS_TOKEN)
#
# Routes are lines of "input-bucket prefix output-bucket" in ROUTES; each input gets events for SUFFIXES.
# They must match the BucketRunner routes in your Serve YAML (README: "Drop a photo into a bucket").
set -euo pipefail
cd "$(dirname "$0")"

ALIAS=portrait
TARGET_ID=${TARGET_ID:-portrait}                       # arn:minio:sqs::<TARGET_ID>:webhook
WEBHOOK_ENDPOINT=${WEBHOOK_ENDPOINT:-http://host.docker.internal:8000/v1/events/s3}
TOKEN=${PORTRAIT_EVENTS_TOKEN:?set PORTRAIT_EVENTS_TOKEN to the token the Serve app checks}
QUEUE_DIR=${QUEUE_DIR:-/events}                        # inside the MinIO container (a volume in docker-compose.yml)
QUEUE_LIMIT=${QUEUE_LIMIT:-10000}
SUFFIXES=${SUFFIXES:-".jpg .jpeg .png .webp"}
ROUTES=${ROUTES:-"photos restore/ results
photos idphoto/ results"}

# `mc` on this machine (talking to MINIO_URL), or the compose service (talking to minio:9000 inside the network).
if command -v mc >/dev/null 2>&1; then
  mc alias set "$ALIAS" "${MINIO_URL:-http://127.0.0.1:9000}" "${MINIO_ROOT_USER:-portrait}" \
    "${MINIO_ROOT_PASSWORD:-portrait-secret}" >/dev/null
  run_mc() { mc "$@"; }
else
  run_mc() { docker compose run --rm -T mc "$@"; }
fi

echo "buckets"
while read -r input prefix output; do
  [ -n "$input" ] || continue
  run_mc mb --ignore-existing "$ALIAS/$input" "$ALIAS/$output"
done <<< "$ROUTES"

echo "webhook target $TARGET_ID -> $WEBHOOK_ENDPOINT (queue_dir $QUEUE_DIR, limit $QUEUE_LIMIT)"
run_mc admin config set "$ALIAS" "notify_webhook:$TARGET_ID" \
  endpoint="$WEBHOOK_ENDPOINT" auth_token="$TOKEN" queue_dir="$QUEUE_DIR" queue_limit="$QUEUE_LIMIT"
run_mc admin service restart "$ALIAS"
for _ in $(seq 1 30); do  # bounded: up to ~30 s for MinIO to come back
  run_mc ready "$ALIAS" >/dev/null 2>&1 && break
  sleep 1
done

echo "events"
arn="arn:minio:sqs::$TARGET_ID:webhook"
while read -r input prefix output; do
  [ -n "$input" ] || continue
  for suffix in $SUFFIXES; do
    # "already exists" on a rerun is fine; anything else stops the script.
    if ! out=$(run_mc event add "$ALIAS/$input" "$arn" --event put --prefix "$prefix" --suffix "$suffix" 2>&1); then
      grep -qi "already exists\|overlapping" <<< "$out" || { echo "$out" >&2; exit 1; }
    fi
  done
  echo "  $input/$prefix*{${SUFFIXES// /,}} -> webhook (results in $output/$prefix)"
done <<< "$ROUTES"
run_mc event list "$ALIAS/photos" "$arn" || true
echo "done: drop a photo with \`mc cp photo.jpg $ALIAS/photos/restore/\` and find it in $ALIAS/results/restore/"
