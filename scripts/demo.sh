#!/usr/bin/env bash
# The main job, locally: starts the emulator stack (unless one is running)
# and runs the sync pipeline on it: a stream of PMS change events, a fleet
# of sync workers, mock OTAs enforcing their published limits, and a report
# per channel endpoint (rate against quota, 429s, deferrals, latency,
# DynamoDB calls per push). Extra arguments go to the demo:
#
#   scripts/demo.sh                               the pipeline, defaults (about a minute)
#   scripts/demo.sh -workers 16 -events 600 -rate 5 -burst 10
#   scripts/demo.sh fleet -workers 40 -rate 20    just the shared bucket: N workers, one limit
#
# It stops on exit only a stack it started itself.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
command -v go >/dev/null 2>&1 || { echo "demo.sh: go is not on PATH" >&2; exit 1; }

started=0
cleanup() {
	local rc=$?
	if ((started)); then scripts/localstack.sh stop || true; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ! scripts/localstack.sh status >/dev/null 2>&1; then
	started=1
fi
eval "$(scripts/localstack.sh start)"
if [[ ${1:-} == fleet ]]; then
	shift
	go run ./test/fleetsim "$@"
else
	go run ./test/pipelinedemo "$@"
fi
