#!/usr/bin/env bash
# Checks that this machine has what fleetbucket's scripts need, and says
# what is missing and how to get it. Fast (no network, nothing installed).
#
#   scripts/doctor.sh              check everything; exit 1 if anything is missing
#   scripts/doctor.sh --for demo   exit 1 only if scripts/demo.sh cannot run
#                                  (Go, Python with moto); the rest are warnings
#   scripts/doctor.sh --for test   exit 1 only if scripts/test.sh cannot run
#                                  (Go, Python with moto, Node.js/npm, cfn-lint)
#   scripts/doctor.sh -q ...       print only problems
#
# What is checked:
#   go        the toolchain go.mod asks for (go 1.26+)           demo, test
#   python3   with moto[server] (moto, flask, flask_cors,       demo, test
#             werkzeug, boto3) importable; without moto,
#             scripts/localstack.sh start installs it into
#             .tools/venv if python3 can make a venv and pip can reach PyPI
#   node/npm  Node.js >= 18 for the CDK CLI and jsii (infra)      test
#   cfn-lint  lints the synthesized template (infra tests)       test
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
FOR=all
QUIET=0
while (($#)); do
	case $1 in
	--for)
		FOR=${2:-}
		shift 2 || true
		;;
	--for=*)
		FOR=${1#--for=}
		shift
		;;
	-q | --quiet)
		QUIET=1
		shift
		;;
	-h | --help)
		sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p;}' "${BASH_SOURCE[0]}"
		exit 0
		;;
	*)
		echo "doctor.sh: unknown argument $1 (see scripts/doctor.sh --help)" >&2
		exit 2
		;;
	esac
done
case $FOR in
all | demo | test) ;;
*)
	echo "doctor.sh: --for $FOR: want demo, test or all" >&2
	exit 2
	;;
esac

fatal=0
warned=0
# needed TOOL: whether the chosen command needs TOOL (all needs everything).
needed() {
	case $FOR:$1 in
	all:* | demo:go | demo:python | test:*) return 0 ;;
	esac
	return 1
}
ok() { ((QUIET)) || printf 'doctor: ok       %-9s %s\n' "$1" "$2" >&2; }
# missing TOOL WHAT HOW: a fatal problem if the command needs TOOL, else a warning.
missing() {
	if needed "$1"; then
		printf 'doctor: MISSING  %-9s %s\n                            how: %s\n' "$1" "$2" "$3" >&2
		fatal=1
	else
		printf 'doctor: warning  %-9s %s (not needed for %s)\n                            how: %s\n' "$1" "$2" "$FOR" "$3" >&2
		warned=1
	fi
}

# ------------------------------------------------------------------- go ----
want_go=$(awk '$1 == "go" { print $2; exit }' "$ROOT/go.mod" 2>/dev/null)
if ! command -v go >/dev/null 2>&1; then
	missing go "go is not on PATH (go.mod wants go $want_go)" "install Go $want_go or newer from https://go.dev/dl/ and put its bin/ on PATH"
else
	have_go=$(go env GOVERSION 2>/dev/null)
	have_go=${have_go#go}
	# sort -V orders versions; the wanted one must not sort after the one we have.
	if [[ -n $want_go && -n $have_go && $(printf '%s\n%s\n' "$want_go" "$have_go" | sort -V | head -n1) != "$want_go" ]]; then
		missing go "go $have_go is older than go.mod's go $want_go" "install Go $want_go or newer from https://go.dev/dl/ (or let GOTOOLCHAIN=auto fetch it)"
	else
		ok go "go $have_go"
	fi
fi

# --------------------------------------------------------------- python ----
moto_mods='("moto", "flask", "flask_cors", "werkzeug", "boto3")'
py_with_moto=""
for cand in "${FLEETBUCKET_PYTHON:-}" python3 "$ROOT/.tools/venv/bin/python"; do
	[[ -n $cand ]] && command -v "$cand" >/dev/null 2>&1 || continue
	if "$cand" -c "import importlib.util as u, sys; sys.exit(0 if all(u.find_spec(m) for m in $moto_mods) else 1)" >/dev/null 2>&1; then
		py_with_moto=$cand
		break
	fi
done
if [[ -n $py_with_moto ]]; then
	ok python "$("$py_with_moto" -c 'import sys; print(sys.executable, sys.version.split()[0])') with moto $("$py_with_moto" -c 'from importlib.metadata import version; print(version("moto"))' 2>/dev/null || echo '?')"
elif ! command -v python3 >/dev/null 2>&1; then
	missing python "python3 is not on PATH (the local DynamoDB/SQS/Secrets Manager emulators are moto servers)" \
		"install Python 3.9+ (Debian/Ubuntu: apt-get install python3 python3-venv), then scripts/localstack.sh start installs moto"
elif python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
	# localstack.sh start can install moto itself: only a warning.
	((QUIET)) || printf 'doctor: note     %-9s %s\n' python "python3 has no moto; scripts/localstack.sh start will install moto[server]==5.2.1 into .tools/venv (needs PyPI), or: pip install \"moto[server]==5.2.1\"" >&2
else
	missing python "python3 has no moto and cannot make a venv to install it into" \
		"pip install \"moto[server]==5.2.1\" (or apt-get install python3-venv and let scripts/localstack.sh start install it)"
fi

# ------------------------------------------------------------- node/npm ----
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	missing node "Node.js/npm not on PATH (the CDK CLI and jsii, which the infra tests and cdk synth run on)" \
		"install Node.js 18+ with npm (https://nodejs.org/ or your package manager); scripts/install-cdk.sh then installs the pinned CDK CLI into .tools/cdk"
else
	node_v=$(node --version 2>/dev/null)
	node_major=${node_v#v}
	node_major=${node_major%%.*}
	if [[ $node_major =~ ^[0-9]+$ ]] && ((node_major < 18)); then
		missing node "Node.js $node_v is too old (jsii and the CDK CLI need 18+)" "install Node.js 18 or newer"
	else
		ok node "node $node_v, npm $(npm --version 2>/dev/null)"
	fi
fi

# ------------------------------------------------------------- cfn-lint ----
if command -v cfn-lint >/dev/null 2>&1; then
	ok cfn-lint "$(command -v cfn-lint)"
else
	missing cfn-lint "cfn-lint is not on PATH (the infra tests lint the synthesized template)" "pip install cfn-lint (or pipx install cfn-lint)"
fi

if ((fatal)); then
	echo "doctor: something ${FOR/all/fleetbucket} needs is missing (see above)" >&2
	exit 1
fi
((QUIET && !warned)) || echo "doctor: ready for ${FOR/all/everything}" >&2
exit 0
