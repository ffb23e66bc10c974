#!/usr/bin/env bash
# Send l4.training.job.failed|succeeded to a Prefect server with curl: no Python, no l4 install
# needed where the training job ends.  `l4 serve`, connected to the same server, reacts.
#
#   l4-emit.sh failed|succeeded JOB_DIR [JOB_ID] [CONFIG_ID] [END_TIME]
#   l4-emit.sh --flush          re-send spooled events (cron-able)
#
# Environment:
#   PREFECT_API_URL   the server's API, e.g. http://prefect.internal:4200/api  (required)
#   PREFECT_API_KEY   sent as a bearer token when set (servers behind an auth proxy)
#   PREFECT_API_AUTH_STRING  "user:password" for a server started with basic auth
#   L4_EMIT_DRY_RUN=1 print the JSON instead of sending it
#   L4_EMIT_TIMEOUT   seconds before giving up on the server (default 5)
#   L4_SPOOL          where unsent events wait (default ${XDG_DATA_HOME:-~/.local/share}/l4/spool,
#                     the directory `l4 emit` uses too)
#
# Never loses an event: when the server does not answer 2xx in time, the event is written to
# the spool (one file per event, atomically: temp file + rename) and this prints
# "l4-emit: spooled ...".  Every later run and `--flush` re-send the spool oldest first and
# delete a file only after the server took it.
#
# Exit status: 0 sent, spooled (or dry run), 1 neither sent nor spooled (or --flush left
# events waiting), 2 usage error.  The event shape is the one flows/events.py documents;
# JOB_ID and CONFIG_ID default to JOB_DIR/job.json, else the directory name / null.  With
# END_TIME the failure key is job:JOB_ID@END_TIME, else dir:JOB_DIR@<newest log mtime>.
set -u

timeout_s=${L4_EMIT_TIMEOUT:-5}
spool=${L4_SPOOL:-${XDG_DATA_HOME:-${HOME:-/tmp}/.local/share}/l4/spool}

auth=()
if [ -n "${PREFECT_API_KEY:-}" ]; then
  auth=(-H "Authorization: Bearer $PREFECT_API_KEY")
elif [ -n "${PREFECT_API_AUTH_STRING:-}" ]; then
  auth=(-u "$PREFECT_API_AUTH_STRING")
fi

# POST one JSON body (a file); success only on 2xx within the timeout.
post_file() {
  local code
  code=$(curl -sS -o /dev/null -w '%{http_code}' --max-time "$timeout_s" \
    --connect-timeout "$timeout_s" \
    -H 'Content-Type: application/json' "${auth[@]}" \
    -X POST --data-binary "@$1" "${PREFECT_API_URL%/}/events" 2>/dev/null)
  case "$code" in 2??) return 0 ;; esac
  last_error="HTTP ${code:-000}"
  [ "${code:-000}" = "000" ] && last_error="server unreachable"
  return 1
}

# Re-send spooled events oldest first; stop at the first the server does not take.
flush_spool() {
  local f left=0 sent=0
  [ -d "$spool" ] || { flushed=0; remaining=0; return 0; }
  for f in $(ls -1 "$spool" 2>/dev/null | grep -E '^[0-9]+-.*\.json$' | sort); do
    if [ "$left" -gt 0 ] || ! post_file "$spool/$f"; then
      left=$((left + 1))
      continue
    fi
    rm -f -- "$spool/$f"
    sent=$((sent + 1))
  done
  flushed=$sent
  remaining=$left
}

if [ "${1:-}" = "--flush" ]; then
  [ -n "${PREFECT_API_URL:-}" ] || { echo "l4-emit: PREFECT_API_URL is not set" >&2; exit 1; }
  flush_spool
  echo "l4-emit: re-sent $flushed spooled event(s), $remaining still waiting in $spool"
  [ "$remaining" -eq 0 ] || exit 1
  exit 0
fi

usage() { echo "usage: $0 failed|succeeded JOB_DIR [JOB_ID] [CONFIG_ID] [END_TIME] | --flush" >&2; exit 2; }

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
end_time=${5:-}

# The failure key, as l4.ingest.failure_key computes it: node files are regular files with
# a log name under logs/ (else the job directory), symlinks not followed.
if [ -n "$end_time" ]; then
  failure_key="job:$job_id@$end_time"
else
  logs=$job_dir
  [ -d "$job_dir/logs" ] && logs=$job_dir/logs
  newest=$(find "$logs" -type f \( -name '*.log' -o -name '*.out' -o -name '*.txt' -o -name '*.err' \
    -o -name '*.log.gz' -o -name '*.out.gz' -o -name '*.txt.gz' -o -name '*.err.gz' \) \
    -printf '%T@\n' 2>/dev/null | sort -n | tail -n 1)
  newest=${newest%%.*}
  failure_key="dir:$job_dir@${newest:-0}"
fi

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
              "config_id": $cfg_json, "baselines": [], "failure_key": $(json_str "$failure_key")}}]
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

# Spool first, then send: the event is on disk before the network is tried, so a crash or
# a kill between the two loses nothing (a re-send is harmless: the failure key dedupes).
mkdir -p "$spool" 2>/dev/null
name="$(printf '%020d' "$(date +%s%N)")-$event_id.json"   # sorts like l4 emit's names
tmp="$spool/.$name.tmp"
if ! { printf '%s\n' "$body" > "$tmp" && { sync "$tmp" 2>/dev/null || true; } &&
       mv -f "$tmp" "$spool/$name"; } 2>/dev/null; then
  rm -f -- "$tmp" 2>/dev/null
  # cannot spool: at least try to send it
  tmp=$(mktemp) && printf '%s\n' "$body" > "$tmp"
  if post_file "$tmp"; then
    rm -f -- "$tmp"
    echo "l4-emit: sent l4.training.job.$kind for $job_id ($job_dir); spool $spool not writable"
    exit 0
  fi
  rm -f -- "$tmp"
  echo "l4-emit: event not sent ($last_error) and spool $spool not writable" >&2
  exit 1
fi
last_error=""
flush_spool   # oldest first, this event last
if [ ! -e "$spool/$name" ]; then
  extra=""
  [ "$flushed" -gt 1 ] && extra=" (and $((flushed - 1)) spooled earlier)"
  echo "l4-emit: sent l4.training.job.$kind for $job_id ($job_dir)$extra"
  exit 0
fi
echo "l4-emit: spooled l4.training.job.$kind for $job_id in $spool/$name ($last_error); $remaining event(s) waiting, re-sent by the next l4-emit or l4-emit.sh --flush"
exit 0
