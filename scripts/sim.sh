#!/usr/bin/env bash
# Runs one fleet scenario of test/sim at full size in simulated time (the
# real syncer, dispatcher, limiter, lanes and push client against in-memory
# DynamoDB, SQS, Lambda and OTAs) and writes its report and chart.
#
#   scripts/sim.sh <scenario> [seed]     scenario: calibrate, steady, storm,
#                                        single-credential, single-credential-sharded, faults,
#                                        onboarding
#   scripts/sim.sh -small <scenario>     the small version go test runs
#   scripts/sim.sh adversary [...]       drawn cases under every invariant (below)
#
# The report goes to stdout and, with its chart, to docs/bench/sim-<scenario>.{txt,svg}
# (FLEETBUCKET_SIM_OUT overrides the directory). No emulator is needed. A
# violated invariant fails the run and prints the seed; the same seed
# replays the same scenario (see test/sim's package doc for what a replay
# keeps).
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd "$SCRIPT_DIR/.." && pwd -P)
cd "$ROOT"

usage() {
	echo "usage: scripts/sim.sh [-small] <calibrate|steady|storm|single-credential|single-credential-sharded|faults|onboarding> [seed]" >&2
	exit 2
}

# scripts/sim.sh adversary [-seeds N] [-seed S] [-parts a,b,c] [-stop]
#   N cases from seed S (default 100 from 1), run on every core; each
#   failing case prints its replay line and its smallest failing case.
#   -parts replays one case: seed S with exactly those parts ("none": none).
#   -stop ends the search at the first failing case.
#   -no-shrink reports failing cases without shrinking them.
#   -draw-only builds the cases without running them: the coverage table
#   alone (docs/bench/adversary-coverage.txt).
#   The coverage table goes to docs/bench/adversary.txt (for N > 1).
if [[ ${1-} == adversary ]]; then
	shift
	seeds=100 first=1 parts=""
	has_parts=0 seeds_given=0
	while [[ $# -gt 0 ]]; do
		case $1 in
		-seeds) seeds=$2; seeds_given=1; shift 2 ;;
		-seed) first=$2; ((seeds_given)) || seeds=1; shift 2 ;;
		-parts) parts=$2; has_parts=1; shift 2 ;;
		-stop) export FLEETBUCKET_ADVERSARY_STOP=1; shift ;;
		-no-shrink) export FLEETBUCKET_ADVERSARY_NO_SHRINK=1; shift ;;
		-draw-only) export FLEETBUCKET_ADVERSARY_DRAW_ONLY=1; shift ;;
		*) echo "usage: scripts/sim.sh adversary [-seeds N] [-seed S] [-parts a,b,c] [-stop] [-no-shrink] [-draw-only]" >&2; exit 2 ;;
		esac
	done
	[[ $seeds =~ ^[0-9]+$ && $first =~ ^[0-9]+$ ]] || { echo "sim.sh: -seeds and -seed take unsigned integers" >&2; exit 2; }
	out=${FLEETBUCKET_SIM_OUT:-$ROOT/docs/bench}
	mkdir -p "$out"
	export GOGC=${GOGC:-400}
	env_parts=()
	((has_parts)) && env_parts=(FLEETBUCKET_ADVERSARY_PARTS="$parts")
	env FLEETBUCKET_ADVERSARY=1 FLEETBUCKET_ADVERSARY_SEEDS="$seeds" FLEETBUCKET_ADVERSARY_FIRST="$first" FLEETBUCKET_SIM_OUT="$out" "${env_parts[@]}" \
		go test -count=1 -timeout 600m -run '^TestAdversaryFull$' -v ./test/sim/ | grep -v -e '^=== RUN' -e '^PASS$'
	exit "${PIPESTATUS[0]}"
fi

small=""
if [[ ${1-} == -small ]]; then
	small=1
	shift
fi
[[ $# -ge 1 && $# -le 2 ]] || usage
case $1 in
calibrate | steady | storm | single-credential | single-credential-sharded | faults | onboarding) ;;
*) usage ;;
esac
seed=${2-1}
[[ $seed =~ ^[0-9]+$ ]] || {
	echo "sim.sh: seed $seed: want an unsigned integer" >&2
	exit 2
}

out=${FLEETBUCKET_SIM_OUT:-$ROOT/docs/bench}
mkdir -p "$out"
# The simulation allocates heavily (every store call copies items); a
# larger heap between collections costs memory, not correctness.
export GOGC=${GOGC:-400}
# ... up to a limit that keeps the largest run (storm, 2,000 properties:
# 5-9 GB live) inside the reference machine's 23 GB. At 12 GiB the storm's
# heap sat at the limit and the collector ran back to back (10 min 37 s).
export GOMEMLIMIT=${GOMEMLIMIT:-16GiB}
FLEETBUCKET_SIM=$1 FLEETBUCKET_SIM_SEED=$seed FLEETBUCKET_SIM_SMALL=$small FLEETBUCKET_SIM_OUT=$out \
	go test -count=1 -timeout 40m -run '^TestSimFull$' -v ./test/sim/ | grep -v -e '^=== RUN' -e '^PASS$'
