#!/usr/bin/env bash
# Runs every check and test of the repository; the README and .ci/run call this.
#
#   scripts/test.sh                      gofmt, go vet, staticcheck, then go test -race of every module
#                                        against the local emulator stack (test/sim without
#                                        -race but for two of its tests)
#   scripts/test.sh -run TestReserve     extra arguments go to `go test`
#   scripts/test.sh ./sdk/... -v         an argument starting with ./ ../ or the module path
#                                        replaces the default package patterns (every
#                                        package of every module)
#
# It installs missing tools into .tools/bin (staticcheck, pinned), starts the
# local stack (scripts/localstack.sh) unless one is already running, exports
# its endpoints and FLEETBUCKET_INTEGRATION=1 (integration tests then fail
# instead of skipping), and stops on exit only a stack it started itself.
# It starts with scripts/doctor.sh --for test. Exits non-zero on any failure.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd "$SCRIPT_DIR/.." && pwd -P)
cd "$ROOT"

MODULE=github.com/fleetbucket/fleetbucket
# staticcheck 2026.2.2 = honnef.co/go/tools v0.8.2 (needs and supports go 1.26).
STATICCHECK_VERSION=v0.8.2
TOOLS_BIN=$ROOT/.tools/bin

step() { printf '\n==> %s\n' "$*" >&2; }
fail() {
	printf 'test.sh: FAIL: %s\n' "$*" >&2
	exit 1
}

# Every prerequisite first (Go, Python with moto, Node.js/npm, cfn-lint), each
# missing one named with how to get it, before minutes of building.
"$SCRIPT_DIR/doctor.sh" --for test -q || fail "missing prerequisites (see above)"

# --------------------------------------------------------------- tools ----

# The installed binary is reused only if it is the pinned version built by the
# current Go toolchain (an older toolchain's build cannot load newer packages).
staticcheck_ok() {
	[[ -x $TOOLS_BIN/staticcheck ]] || return 1
	local info
	info=$(go version -m "$TOOLS_BIN/staticcheck" 2>/dev/null) || return 1
	[[ $(awk 'NR == 1 { print $2 }' <<<"$info") == "$(go env GOVERSION)" ]] || return 1
	[[ $(awk '$1 == "mod" && $2 == "honnef.co/go/tools" { print $3 }' <<<"$info") == "$STATICCHECK_VERSION" ]]
}

if ! staticcheck_ok; then
	step "installing staticcheck $STATICCHECK_VERSION into .tools/bin"
	mkdir -p "$TOOLS_BIN"
	GOBIN=$TOOLS_BIN go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION" ||
		fail "could not install staticcheck $STATICCHECK_VERSION"
fi

# aws-lambda-rie runs the real sync bootstrap in the end-to-end test. The Go
# module proxy serves it; its pseudo-version is pinned.
RIE_VERSION=v0.0.0-20261030222936-bef5c4ba774d
if [[ ! -x $TOOLS_BIN/aws-lambda-rie || $(go version -m "$TOOLS_BIN/aws-lambda-rie" 2>/dev/null | awk '$1 == "mod" { print $3 }') != "$RIE_VERSION" ]]; then
	step "installing aws-lambda-rie $RIE_VERSION into .tools/bin"
	mkdir -p "$TOOLS_BIN"
	CGO_ENABLED=0 GOBIN=$TOOLS_BIN go install "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$RIE_VERSION" ||
		fail "could not install aws-lambda-rie $RIE_VERSION"
fi

# ---------------------------------------------------------------- lint ----

step "gofmt -l"
# The same directories the go command ignores: dot and underscore folders
# (.tools holds node_modules with CDK template files), testdata, plus
# node_modules and cdk.out anywhere.
unformatted=$(
	find . -type d \( -name '.?*' -o -name '_*' -o -name testdata -o -name node_modules \
		-o -name cdk.out -o -name vendor \) -prune -o -type f -name '*.go' -print0 |
		xargs -0 -r gofmt -l 2>&1
) || fail "gofmt could not parse every file:
$unformatted"
if [[ -n $unformatted ]]; then
	fail "these files are not gofmt-ed (run: gofmt -w <file>):
$unformatted"
fi

# Four modules: the SDK (sdk/, its own module so that a service adopting it
# inherits none of the programs' requirements), the programs and test
# harness around it (the root), the CDK app (infra) and the comparison
# benchmarks (test/benchcompare, which depend on another limiter library).
# Each is checked alone (GOWORK=off), from its own go.mod and its replace
# directives, as a user or a deploy builds it; go.work is for working on
# them together.
MODULES=(sdk . infra test/benchcompare)
export GOWORK=off
for mod in "${MODULES[@]}"; do
	step "go vet ./... in $mod"
	(cd "$mod" && go vet ./...) || fail "go vet in $mod"
	step "staticcheck ./... in $mod"
	(cd "$mod" && "$TOOLS_BIN/staticcheck" ./...) || fail "staticcheck in $mod"
done

# --------------------------------------------------------------- stack ----

started_stack=0
go_pid=""

# go test runs in its own session/process group so that a signal to this
# script can stop it together with the test binaries it spawned (`go` alone
# dies on TERM and leaves them running).
stop_go_test() {
	[[ -n $go_pid ]] || return 0
	if kill -0 "$go_pid" 2>/dev/null; then
		kill -TERM -- "-$go_pid" 2>/dev/null || kill -TERM "$go_pid" 2>/dev/null || true
		wait "$go_pid" 2>/dev/null || true
	fi
	go_pid=""
}

cleanup() {
	local rc=$?
	stop_go_test
	if ((started_stack)); then
		step "stopping the local stack"
		"$SCRIPT_DIR/localstack.sh" stop || rc=1
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if "$SCRIPT_DIR/localstack.sh" status >/dev/null 2>&1; then
	step "using the local stack that is already running (it stays running)"
else
	step "starting the local stack"
	started_stack=1
fi
stack_env=$("$SCRIPT_DIR/localstack.sh" start) || fail "could not start the local stack (see above)"
eval "$stack_env"
export FLEETBUCKET_INTEGRATION=1
# The CDK tests run jsii on the machine's Node.js 20; its end-of-life banner
# is noise in every test's output.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20

# ---------------------------------------------------------------- test ----

pkgs=(./...)
for arg in "$@"; do
	case $arg in
	./* | ../* | "$MODULE" | "$MODULE"/*) pkgs=() ;;
	esac
done

run_go_test() { # [-N] [-W] [-C DIR] [-T TIMEOUT] ARGS...: go test -race in the module at DIR (default the root); -N without -race; -W in the workspace (go.work)
	local dir=. timeout=20m gowork=off race=-race
	if [[ ${1-} == -N ]]; then
		race=
		shift
	fi
	if [[ ${1-} == -W ]]; then
		gowork=
		shift
	fi
	if [[ ${1-} == -C ]]; then
		dir=$2
		shift 2
	fi
	if [[ ${1-} == -T ]]; then
		timeout=$2
		shift 2
	fi
	# -vet=off: go vet ran on every module above; go test would run its
	# subset of the same checks again on every package.
	step "go test${race:+ $race} -count=1 -vet=off -timeout $timeout $* (module $dir)"
	local go_test=(env "GOWORK=$gowork" go test -C "$dir" ${race:+"$race"} -count=1 -vet=off -timeout "$timeout" "$@")
	if command -v setsid >/dev/null 2>&1; then
		setsid "${go_test[@]}" </dev/null &
	else # macOS: job control puts the background job in its own process group
		set -m
		"${go_test[@]}" </dev/null &
		set +m
	fi
	go_pid=$!
	local rc=0
	wait "$go_pid" || rc=$?
	go_pid=""
	((rc == 0)) || fail "go test (exit status $rc)"
}

if [[ ${pkgs[*]} == ./... ]]; then
	# The integration tests pace a fleet in real time against the emulators;
	# they run alone, after everything else, so that compiling and running
	# the other packages (the CDK tests above all) does not starve them of
	# CPU on a 2-core machine.
	run_go_test -C sdk ./... "$@"
	mapfile -t others < <(go list ./... | grep -v -e '/test/integration$' -e '/test/sim$')
	run_go_test "${others[@]}" "$@"
	# The simulation is CPU-bound runs of the pipeline's logic in simulated
	# time: under -race it took 294 s of the suite (102 s without for the
	# adversary's cases, 49 s for the rest). It runs without; the two of its
	# tests that drive the SDK's concurrency hardest (outages, deaths,
	# reordered and duplicate deliveries) run again under -race.
	run_go_test -N ./test/sim/ "$@"
	run_go_test -run '^(TestSimFaults|TestLanesEndAtTheNewestStateDespiteReorderingDuplicatesAndAnOutage)$' ./test/sim/ "$@"
	run_go_test -C infra ./... "$@"
	# Benchmarks only: compiled and vetted here, run by scripts/bench.sh.
	run_go_test -C test/benchcompare ./... "$@"
	# One binary runs the emulator tests: the serial ones in turn, then the
	# t.Parallel ones two at a time (581 s on a heavily loaded 2-core
	# machine at the last count, 995 s before; docs/benchmarks.md), so its
	# limit leaves room to grow while a hung test still ends well inside
	# CI's 90 minutes.
	run_go_test -T 40m ./test/integration/ "$@"
else
	# Named packages may be in any module (./sdk/... as well as ./test/...):
	# the workspace resolves them from the root.
	run_go_test -W "${pkgs[@]}" "$@"
fi

# The deployable stack: the real pinned CDK CLI synthesizes it offline (no
# AWS account), building the arm64 bootstrap itself, as `cdk deploy` would.
step "cdk synth (offline)"
synth_out=$(mktemp -d)
"$SCRIPT_DIR/cdk.sh" synth --quiet -o "$synth_out" || fail "cdk synth"
rm -rf "$synth_out"

step "all checks passed"
