#!/usr/bin/env bash
# Send l4.training.job.failed|succeeded to a Prefect server with curl: no Python, no l4 install
# needed where the training job ends.  `l4 serve`, connected to the same server, reacts.
#
#   l4-emit.sh failed|succeeded JOB_DIR [JOB_ID] [CONFIG_ID]
#
# Environment:
#   PREFECT_API_URL   the server's API, e.g. http://prefect.internal:4200/api  (required)
#   PREFECT_API_KEY   sent as a bearer token when set (servers behind an auth proxy)
#   PREFECT_API_AUTH_STRING  "user:password" for a server started with basic auth
#   L4_EMIT_DRY_RUN=1 print the JSON instead of sending it
#   L4_EMIT_TIMEOUT   seconds before giving up (default 10)
#
# Exit status: 0 sent (or dry run), 1 not sent, 2 usage error.  The event shape is the one
# flows/events.py documents; JOB_ID and CONFIG_ID default to JOB_DIR/job.json, else the
# directory name / null.
set -u

usage() { echo "usage: $0 failed|succeeded JOB_DIR [JOB_ID] [CONFIG_ID]" >&2; exit 2; }

[ $# -ge 2 ] || usage
kind=$1
job_dir=$2
case "$kind" in
  failed|succeeded) ;;
  *) usage ;;
esac
[ -d "$job_dir" ] || { echo "l4-emit: $job_dir is not a directory" >&2; exit 1; }
job_dir=$(cd "$job_dir" && pwd -P)

# A JSON string literal (quotes, backslashes and control characters escaped).
json_str() {
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}
  s=${s//$'\r'/\\r}
  s=${s//$'\t'/\\t}
  printf '"%s"' "$s"
}

# A top-level string field of job.json, without jq (flat "key": "value" pairs only).
job_json_field() {
  local f="$job_dir/job.json"
  [ -r "$f" ] || return 0
  sed -n "s/.*\"$1\"[[:space:]]*:[[:space:]]*\"\([^\"]*\)\".*/\1/p" "$f" | head -n 1
}

job_id=${3:-$(job_json_field job_id)}
job_id=${job_id:-$(basename "$job_dir")}
config_id=${4:-$(job_json_field config_id)}

if [ -r /proc/sys/kernel/random/uuid ]; then
  event_id=$(cat /proc/sys/kernel/random/uuid)
else
  event_id=$(uuidgen 2>/dev/null || od -x /dev/urandom | head -1 | awk '{print $2$3"-"$4"-4"substr($5,2)"-a"substr($6,2)"-"$7$8$9}')
fi
occurred=$(date -u +%Y-%m-%dT%H:%M:%S.000000Z)

if [ -n "$config_id" ]; then
  cfg_json=$(json_str "$config_id")
  cfg_label=", \"l4.config.id\": $cfg_json"
else
  cfg_json=null
  cfg_label=""
fi

body=$(cat <<JSON
[{"id": "$event_id", "occurred": "$occurred", "event": "l4.training.job.$kind",
  "resource": {"prefect.resource.id": $(json_str "l4.job.$job_id"), "prefect.resource.name": $(json_str "$job_id"),
               "l4.job.dir": $(json_str "$job_dir")$cfg_label},
  "payload": {"job_dir": $(json_str "$job_dir"), "job_id": $(json_str "$job_id"),
              "config_id": $cfg_json, "baselines": []}}]
JSON
)

if [ "${L4_EMIT_DRY_RUN:-0}" = "1" ]; then
  printf '%s\n' "$body"
  exit 0
fi
if [ -z "${PREFECT_API_URL:-}" ]; then
  echo "l4-emit: PREFECT_API_URL is not set (e.g. http://prefect.internal:4200/api)" >&2
  exit 1
fi

auth=()
if [ -n "${PREFECT_API_KEY:-}" ]; then
  auth=(-H "Authorization: Bearer $PREFECT_API_KEY")
elif [ -n "${PREFECT_API_AUTH_STRING:-}" ]; then
  auth=(-u "$PREFECT_API_AUTH_STRING")
fi
code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time "${L4_EMIT_TIMEOUT:-10}" \
  --retry 3 --retry-delay 1 --retry-connrefused \
  -H 'Content-Type: application/json' "${auth[@]}" \
  -X POST --data-binary "$body" "${PREFECT_API_URL%/}/events")
if [ "$code" = "204" ] || [ "$code" = "200" ]; then
  echo "l4-emit: sent l4.training.job.$kind for $job_id ($job_dir)"
  exit 0
fi
echo "l4-emit: server answered HTTP $code; event not sent" >&2
exit 1
