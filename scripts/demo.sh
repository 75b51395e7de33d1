#!/usr/bin/env bash
# The main job, locally: starts the emulator stack (unless one is running)
# and runs a fleet of workers that share one fleetbucket bucket, printing
# the aggregate rate against the limit. Extra arguments go to the demo, e.g.
#
#   scripts/demo.sh -workers 40 -rate 20 -burst 40 -duration 20s
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
go run ./test/fleetsim "$@"
