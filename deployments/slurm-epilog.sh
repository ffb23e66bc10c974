#!/usr/bin/env bash
# Slurm EpilogSlurmctld for l4: when a training job ends, tell `l4 serve` (through the Prefect
# server) to diagnose it (non-zero exit or signal: l4.training.job.failed) or to learn from it
# (exit 0: l4.training.job.succeeded).  It runs once per job on the slurmctld host.
#
# Install (as root on the slurmctld host; the log directories must be on shared storage that
# the machine running `l4 serve` mounts at the same path):
#   install -m 755 deployments/slurm-epilog.sh /etc/slurm/l4-epilog.sh
#   install -m 755 deployments/l4-emit.sh      /etc/slurm/l4-emit.sh
#   cat > /etc/slurm/l4-epilog.env <<CONF
#   PREFECT_API_URL=http://prefect.internal:4200/api
#   L4_JOB_DIR_PATTERN=/shared/l4-jobs/%j
#   CONF
#   # slurm.conf (then `scontrol reconfigure`); chain it from an existing EpilogSlurmctld if
#   # you already have one:
#   EpilogSlurmctld=/etc/slurm/l4-epilog.sh
#
# Which jobs: those whose log directory exists.  It is found from the job's comment
# (`sbatch --comment "l4dir=/shared/run42 l4config=llama-70b-tp8"`), else from
# L4_JOB_DIR_PATTERN with %j (job id), %u (user), %x (job name) replaced.  Jobs without such
# a directory are ignored, so the epilog is harmless for everything else on the cluster.
#
# Settings (environment, or /etc/slurm/l4-epilog.env, or L4_EPILOG_ENV=<file>):
#   PREFECT_API_URL     required
#   L4_JOB_DIR_PATTERN  default /shared/l4-jobs/%j
#   L4_EMIT             path of l4-emit.sh (default: next to this script)
#   L4_EPILOG_LOG       append a line per job here (default: syslog via `logger`, if present)
#   L4_SPOOL            where events wait while the server is unreachable (default
#                       /var/spool/l4; create it: install -d -o slurm /var/spool/l4), re-sent
#                       by the next job's epilog or a cron `l4-emit.sh --flush`
#
# The epilog never fails: Slurm drains a node whose epilog fails, and diagnosis is never
# worth that.  Every outcome is logged instead: "event sent", "event spooled" (the server was
# unreachable; the event waits in L4_SPOOL) or "event not sent".
set -u

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
env_file=${L4_EPILOG_ENV:-/etc/slurm/l4-epilog.env}
if [ -r "$env_file" ]; then
  set -a
  # shellcheck disable=SC1090
  . "$env_file"
  set +a
fi

export L4_SPOOL=${L4_SPOOL:-/var/spool/l4}

log() {
  if [ -n "${L4_EPILOG_LOG:-}" ]; then
    printf '%s l4-epilog: %s\n' "$(date -u +%FT%TZ)" "$*" >> "$L4_EPILOG_LOG" 2>/dev/null
  elif command -v logger >/dev/null 2>&1; then
    logger -t l4-epilog -- "$*" 2>/dev/null
  else
    printf 'l4-epilog: %s\n' "$*" >&2
  fi
}

main() {
  local job_id=${SLURM_JOB_ID:-${SLURM_JOBID:-}}
  if [ -z "$job_id" ]; then
    log "no SLURM_JOB_ID: not running as a Slurm epilog; nothing to do"
    return 0
  fi

  # Job directory and configuration: the job's comment first, then the pattern.
  local comment=${SLURM_JOB_COMMENT:-} dir="" config="" word
  for word in $comment; do
    case "$word" in
      l4dir=*) dir=${word#l4dir=} ;;
      l4config=*) config=${word#l4config=} ;;
    esac
  done
  if [ -z "$dir" ]; then
    dir=${L4_JOB_DIR_PATTERN:-/shared/l4-jobs/%j}
    dir=${dir//%j/$job_id}
    dir=${dir//%u/${SLURM_JOB_USER:-}}
    dir=${dir//%x/${SLURM_JOB_NAME:-}}
  fi
  if [ ! -d "$dir" ]; then
    return 0  # not a job l4 watches
  fi

  # Outcome: any non-zero exit status, signal (timeouts, hangs, OOM kills) or failed step.
  local raw=${SLURM_JOB_EXIT_CODE:-0} derived=${SLURM_JOB_DERIVED_EC:-0} pair=${SLURM_JOB_EXIT_CODE2:-0:0}
  local kind=succeeded
  if [ "$raw" != "0" ] || [ "$derived" != "0" ] || [ "$pair" != "0:0" ]; then
    kind=failed
  fi

  local emit=${L4_EMIT:-$here/l4-emit.sh}
  if [ ! -x "$emit" ]; then
    log "job $job_id: $emit is missing or not executable; event not sent"
    return 0
  fi
  # The end time names the failure (job id + end time), so a re-sent epilog is diagnosed once.
  local out end=${SLURM_JOB_END_TIME:-}
  if out=$(timeout 30 "$emit" "$kind" "$dir" "$job_id" "$config" "$end" 2>&1); then
    case "$out" in
      *"l4-emit: spooled"*) log "job $job_id ($kind, exit $pair): event spooled, server unreachable: $out" ;;
      *) log "job $job_id ($kind, exit $pair): event sent: $out" ;;
    esac
  else
    log "job $job_id ($kind, exit $pair): event not sent: $out"
  fi
  return 0
}

main "$@"
exit 0
