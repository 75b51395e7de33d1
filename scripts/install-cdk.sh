#!/usr/bin/env bash
# Installs the pinned AWS CDK CLI (infra/cli/package.json + package-lock.json)
# into .tools/cdk with `npm ci`. Never installs node_modules in the Go module
# root: the CLI ships *.template.go files that break `go vet ./...`.
#
#   scripts/install-cdk.sh          install if missing or out of date (idempotent)
#   scripts/install-cdk.sh --force  reinstall
#
# Skips when .tools/cdk already holds exactly the committed lock file and the
# CLI's binary is present. Prints the install directory on stdout.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd "$SCRIPT_DIR/.." && pwd -P)
SRC=$ROOT/infra/cli
DEST=$ROOT/.tools/cdk

fail() {
	printf 'install-cdk.sh: %s\n' "$*" >&2
	exit 1
}

command -v npm >/dev/null 2>&1 || fail "npm is not on PATH (Node.js >= 18 is needed for the CDK CLI)"
[[ -f $SRC/package.json && -f $SRC/package-lock.json ]] || fail "missing $SRC/package.json or package-lock.json"

force=0
[[ ${1:-} == --force ]] && force=1

installed() {
	[[ -x $DEST/node_modules/.bin/cdk ]] &&
		cmp -s "$SRC/package.json" "$DEST/package.json" &&
		cmp -s "$SRC/package-lock.json" "$DEST/package-lock.json" &&
		# npm ci writes this file; its absence means an interrupted install.
		[[ -f $DEST/node_modules/.package-lock.json ]]
}

if ((force == 0)) && installed; then
	printf '%s\n' "$DEST"
	exit 0
fi

printf 'install-cdk.sh: installing the CDK CLI into %s\n' "$DEST" >&2
mkdir -p "$DEST"
cp "$SRC/package.json" "$SRC/package-lock.json" "$DEST/"
# --ignore-scripts: the CLI needs no install scripts; no audit/fund network calls.
npm ci --prefix "$DEST" --ignore-scripts --no-audit --no-fund --loglevel=error >&2 ||
	fail "npm ci failed (offline? the npm cache must hold aws-cdk at the pinned version)"
installed || fail "install finished but $DEST/node_modules/.bin/cdk is missing"
printf '%s\n' "$DEST"
