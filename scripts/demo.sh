#!/usr/bin/env bash
# The main job, locally: starts the emulator stack (unless one is running)
# and runs the sync pipeline on it: a stream of PMS change events, a fleet
# of sync workers, mock OTAs enforcing their published limits, and a report
# per channel endpoint (rate against quota, 429s, deferrals, latency,
# DynamoDB calls per push). Extra arguments go to the demo:
#
#   scripts/demo.sh                               the pipeline, defaults (about a minute)
#   scripts/demo.sh -poison 5                     5 changes name a room type no OTA mapped: each is isolated and dead-lettered alone
#   scripts/demo.sh -format json                  both mock OTAs take fleetbucket's JSON body (default: booking_com opentravel, expedia expedia-ar)
#   scripts/demo.sh -resync                       hotel-0's stored year resynced at the bulk class while the live stream runs: when it is in sync against the quota-bound floor, live latency during it
#   scripts/demo.sh -workers 16 -events 600 -rate 5 -burst 10
#   scripts/demo.sh fleet -workers 40 -rate 20    just the shared bucket: N workers, one limit
#
# It first runs scripts/doctor.sh --for demo (stops if Go or Python/moto is
# missing), and stops with a clear message if the local stack does not
# start. It stops on exit only a stack it started itself.
#
# With FLEETBUCKET_TABLE_PREFIX set it starts nothing and runs against the
# endpoint you bring (DynamoDB Local, or an AWS account), taken from the AWS
# SDK's environment (AWS_ENDPOINT_URL_DYNAMODB, AWS_ENDPOINT_URL_SQS,
# AWS_REGION, credentials): its tables and queues are named with the prefix
# and deleted at the end. See docs/operations.md.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"
fail() {
	printf 'demo.sh: %s\n' "$*" >&2
	exit 1
}
run_demo() {
	if [[ ${1:-} == fleet ]]; then
		shift
		go run ./test/fleetsim "$@"
	else
		go run ./test/pipelinedemo "$@"
	fi
}

if [[ -n ${FLEETBUCKET_TABLE_PREFIX:-} ]]; then
	command -v go >/dev/null 2>&1 || fail "go not found (scripts/doctor.sh says how to get it)"
	printf 'demo.sh: %s is set: running against the endpoint in the environment, not the local stack\n' FLEETBUCKET_TABLE_PREFIX >&2
	run_demo "$@"
	exit
fi

scripts/doctor.sh --for demo -q || fail "missing prerequisites (see above; scripts/doctor.sh lists them all)"

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
# Not eval "$(...)": that would hide a failed start and run on with whatever
# endpoints happen to be exported.
stack_env=$(scripts/localstack.sh start) ||
	fail "the local emulator stack did not start (its error is above; logs in .local/stack/*.log). Try: scripts/localstack.sh stop && scripts/localstack.sh start"
[[ $stack_env == *AWS_ENDPOINT_URL_DYNAMODB=* && $stack_env == *AWS_ENDPOINT_URL_SQS=* ]] ||
	fail "scripts/localstack.sh start printed no endpoints; not running the demo against whatever is in the environment"
eval "$stack_env"
run_demo "$@"
