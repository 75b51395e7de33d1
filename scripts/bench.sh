#!/usr/bin/env bash
# Runs the benchmark suite of fleetbucket against the common approach and
# prints the results as Markdown, which it also writes to docs/bench/report.md
# (the raw report of one run; docs/benchmarks.md states each figure once):
#
#   (a) DynamoDB requests and billed capacity per granted token, 1 and 16
#       workers on one key, fleetbucket (Wait, Take) vs the common
#       read-then-conditional-write bucket (github.com/mennanov/limiters),
#       and how far each over- or under-grants burst + rate·T;
#   (b) utilization under overload at 16 workers;
#   (c) re-deferrals per job at 10x overload through SQS, reserve-and-defer
#       vs take-or-defer;
#   (d) Take latency / a bare UpdateItem;
#   (e) the seed articles' figure: per-worker local limiters vs one shared
#       bucket at 4 and 40 workers against the mock OTA, drawn to
#       docs/bench/fleet-vs-local.svg;
#   (f) fairness across OS processes (margin 100ms, the config default): 8 worker processes × 5 pushers push
#       for 10 s through otapush on one bucket (20/s, burst 40) against a mock
#       OTA with its own sliding-window check (test/fairness, ~15 s).
#
# scripts/bench.sh -f runs (f) alone and prints its section (~20 s).
# scripts/bench.sh -a runs (h) alone, the hidden limit at half the configured
# rate (test/bench/cmd/adaptive, ~4.5 min), prints its section and writes it to
# docs/bench/adaptive-limit.md.
#
# It starts the local stack (scripts/localstack.sh) unless one is running,
# and on exit stops only a stack it started. About 2-3 minutes on 2 cores.
set -euo pipefail

usage() {
	cat <<'EOF'
usage: scripts/bench.sh [-d SECONDS] [-o REPORT.md] [-c CHART.svg]
       scripts/bench.sh -f
       scripts/bench.sh -a

Runs every benchmark on the local stack and prints a Markdown report.

  -d SECONDS   how long each contended fleet and each seed-figure run lasts
               (2..60, default 5)
  -o FILE      where to write the report (default docs/bench/report.md;
               "-" prints it only)
  -c FILE      where to draw the seed figure (default docs/bench/fleet-vs-local.svg)
  -f           run only the fairness benchmark (f) and print its section;
               no file is written
  -a           run only the adaptive-limit benchmark (h): a hidden limit at
               half the configured rate, then raised back; adaptive vs
               penalize-only vs per-process adaptive (~4.5 min); prints its
               section and writes docs/bench/adaptive-limit.md
  -h           this help
EOF
}

die_usage() {
	printf 'bench.sh: %s\n\n' "$1" >&2
	usage >&2
	exit 2
}

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
duration=5
fairness_only=0
adaptive_only=0
out=$ROOT/docs/bench/report.md
chart=$ROOT/docs/bench/fleet-vs-local.svg

abspath() { # resolve against the caller's directory, before we cd
	case $1 in
	/*) printf '%s\n' "$1" ;;
	*) printf '%s\n' "$PWD/$1" ;;
	esac
}

while getopts ':d:o:c:fah' opt; do
	case $opt in
	d) duration=$OPTARG ;;
	f) fairness_only=1 ;;
	a) adaptive_only=1 ;;
	o) [[ $OPTARG == - ]] && out=- || out=$(abspath "$OPTARG") ;;
	c) chart=$(abspath "$OPTARG") ;;
	h)
		usage
		exit 0
		;;
	:) die_usage "-$OPTARG needs a value" ;;
	*) die_usage "unknown flag -$OPTARG" ;;
	esac
done
shift $((OPTIND - 1))
(($# == 0)) || die_usage "unexpected argument: $1"
if ! [[ $duration =~ ^[0-9]+$ ]] || ((10#$duration < 2 || 10#$duration > 60)); then
	die_usage "-d $duration: want a whole number of seconds in 2..60"
fi
duration=$((10#$duration))
for f in "$out" "$chart"; do
	[[ $f == - ]] && continue
	[[ -d $(dirname "$f") ]] || die_usage "no such directory: $(dirname "$f")"
done
[[ $chart == *.svg ]] || die_usage "-c $chart: the chart is SVG, want a .svg path"

cd "$ROOT"
command -v go >/dev/null 2>&1 || {
	echo "bench.sh: go is not on PATH" >&2
	exit 1
}

t0=$SECONDS
step() {
	printf '\n==> %s  at %ds\n' "$*" $((SECONDS - t0)) >&2
}

tmp=$(mktemp -d)
started=0
cleanup() {
	local rc=$?
	if ((started)); then
		step "stopping the local stack this script started"
		scripts/localstack.sh stop || true
	fi
	rm -rf "$tmp"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------- build ----

step "building the benchmarks"
# One binary is the fairness driver and, started as "fairness worker", each
# of its worker processes.
go build -o "$tmp/fairness" ./test/fairness/cmd/fairness
go build -o "$tmp/adaptive" ./test/bench/cmd/adaptive
if ((!fairness_only && !adaptive_only)); then
	go test -c -o "$tmp/bench.test" ./test/bench
	go build -o "$tmp/benchreport" ./test/bench/cmd/benchreport
	# The comparison is its own module (third-party limiters stay out of the
	# SDK's go.mod); -mod=mod lets it follow changes to the requirements of
	# the modules it replaces, which go.work's workspace mode would refuse.
	(cd test/benchcompare && GOWORK=off go test -mod=mod -c -o "$tmp/compare.test" . &&
		GOWORK=off go build -mod=mod -o "$tmp/seedfigure" ./cmd/seedfigure)
fi

# ---------------------------------------------------------------- stack ----

if scripts/localstack.sh status >/dev/null 2>&1; then
	step "using the local stack that is already running (it stays running)"
else
	step "starting the local stack"
	started=1
fi
stack_env=$(scripts/localstack.sh start) || {
	echo "bench.sh: could not start the local stack (see above)" >&2
	exit 1
}
eval "$stack_env"

# ------------------------------------------------------------------ run ----

moto=$(python3 -c 'import moto; print(moto.__version__)' 2>/dev/null || echo '?')
env_line="$(date -u +%Y-%m-%d), $(go env GOVERSION) $(go env GOOS)/$(go env GOARCH), $(getconf _NPROCESSORS_ONLN 2>/dev/null || echo '?') cores, moto $moto"

failed=()
fairness() { # (f): the section goes to $tmp/fairness.md, the numbers to $tmp/fairness.json
	step "(f) fairness across OS processes (8 processes × 5 pushers, 10 s)"
	if ! "$tmp/fairness" -procs 8 -pushers 5 -duration 10s -margin 100ms -env "$env_line" -json "$tmp/fairness.json" >"$tmp/fairness.md"; then
		failed+=("(f) fairness")
	fi
}
if ((adaptive_only)); then
	step "(h) hidden limit at half the configured rate, then raised back (~4.5 min)"
	"$tmp/adaptive" -workers 12 -hidden-burst 10 -hidden 120s -raised 120s -env "$env_line" >"$tmp/adaptive.md" || {
		echo "bench.sh: FAILED: (h) adaptive" >&2
		exit 1
	}
	printf '\n' >&2
	cat "$tmp/adaptive.md"
	cp "$tmp/adaptive.md" "$ROOT/docs/bench/adaptive-limit.md.tmp" && mv -f "$ROOT/docs/bench/adaptive-limit.md.tmp" "$ROOT/docs/bench/adaptive-limit.md"
	step "wrote docs/bench/adaptive-limit.md"
	exit 0
fi
if ((fairness_only)); then
	fairness
	printf '\n' >&2
	cat "$tmp/fairness.md"
	if ((${#failed[@]})); then
		printf 'bench.sh: FAILED: %s\n' "${failed[@]}" >&2
		exit 1
	fi
	exit 0
fi

bench() { # NAME OUTPUT COMMAND...: run one benchmark binary, keep going on failure
	local name=$1 output=$2
	shift 2
	step "$name"
	if ! "$@" 2>&1 | tee "$output" >&2; then
		failed+=("$name")
	fi
}

bench "(d) Take latency vs a bare UpdateItem" "$tmp/latency.txt" \
	"$tmp/bench.test" -test.run '^$' -test.bench '^BenchmarkTakeUncontended$' -test.benchtime 300x
bench "(c) deferral at 10x overload (SQS)" "$tmp/overload.txt" \
	"$tmp/bench.test" -test.run '^$' -test.bench '^BenchmarkOverloadDeferral$' -test.benchtime 1x
bench "(a, b) fleetbucket vs the common DynamoDB bucket" "$tmp/compare.txt" \
	"$tmp/compare.test" -test.run '^$' -test.bench . -test.benchtime 1x -fleet.duration "${duration}s"

step "(e) local limiters vs one shared bucket, drawing $chart"
if ! "$tmp/seedfigure" -duration "${duration}s" -out "$chart" -json "$tmp/seed.json" >"$tmp/seed.md"; then
	failed+=("(e) seedfigure")
	rm -f "$tmp/seed.json" "$tmp/seed.md"
fi
fairness

# --------------------------------------------------------------- report ----

chart_link=""
if [[ $out != - ]]; then
	chart_link=$(python3 -c 'import os, sys; print(os.path.relpath(sys.argv[1], os.path.dirname(sys.argv[2])))' "$chart" "$out" 2>/dev/null || echo "$chart")
fi
args=(-bench "$tmp/latency.txt" -bench "$tmp/overload.txt" -bench "$tmp/compare.txt" -env "$env_line" -chart "$chart_link")
[[ -f $tmp/seed.json ]] && args+=(-seed-json "$tmp/seed.json" -seed-md "$tmp/seed.md")
[[ -s $tmp/fairness.json ]] && args+=(-fairness-json "$tmp/fairness.json")
[[ -s $tmp/fairness.md ]] && args+=(-fairness-md "$tmp/fairness.md")
"$tmp/benchreport" "${args[@]}" >"$tmp/report.md"

printf '\n' >&2
cat "$tmp/report.md"
if [[ $out != - ]]; then
	cp "$tmp/report.md" "$out.tmp" && mv -f "$out.tmp" "$out"
	step "wrote $out and $chart"
fi
if ((${#failed[@]})); then
	printf 'bench.sh: FAILED: %s\n' "${failed[@]}" >&2
	exit 1
fi
