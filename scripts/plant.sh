#!/usr/bin/env bash
# Plants one known bug in a scratch copy of the tree and runs the adversary
# on it from seed 1, stopping at the first failing case: how far the bug
# hides from the catalogue (docs/adversary-findings.md, planted bugs).
#
#   scripts/plant.sh <bug> [seeds]     seeds: how many from seed 1 (200)
#
#   margin      every endpoint's margin read as 0 (config.Endpoint.withMargin)
#   lease       the dispatcher never releases an in-flight lease
#   quota       a push's retries skip the calendar quota (otapush.Client.Push)
#   compact     a compaction keeps the oldest sequence of what it merges
#   retryafter  a throttle waits the policy's default, not the vendor's Retry-After
#
# FLEETBUCKET_ADVERSARY_FIRST starts the search at another seed, and
# FLEETBUCKET_ADVERSARY_PARTS runs that one seed with exactly those parts
# (as scripts/sim.sh adversary -seed S -parts a,b does).
#
# The copy lives in a temporary directory, so the tree is never changed
# and several plants may run at once. The adversary's log goes to
# $FLEETBUCKET_SIM_OUT/plant-<bug>.log (default /tmp); the script prints the
# first failing case, its smallest case and what it broke, or that none
# failed.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
ROOT=$(cd "$SCRIPT_DIR/.." && pwd -P)

[[ $# -ge 1 && $# -le 2 ]] || { sed -n '2,18p' "$0" >&2; exit 2; }
bug=$1 seeds=${2:-200}
[[ $seeds =~ ^[0-9]+$ ]] || { echo "plant.sh: seeds: want an unsigned integer" >&2; exit 2; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -C "$ROOT" --exclude=./.git --exclude=./.local --exclude=./.tools -cf - . | tar -C "$tmp" -xf -
cd "$tmp"

# plant FILE SED-SCRIPT: applies the edit and checks that it changed FILE.
plant() {
	cp "$1" "$1.orig"
	sed -i "$2" "$1"
	if cmp -s "$1" "$1.orig"; then
		echo "plant.sh: $bug: the edit no longer applies to $1 (the code moved): update the plant" >&2
		exit 1
	fi
	rm "$1.orig"
}
case $bug in
margin) plant sdk/pipeline/config/margin.go 's/	l.Margin = e.KeptMargin()/	l.Margin = 0/' ;;
lease) plant sdk/pipeline/dispatch/lease.go 's/		if err := d.Leases.Gate.Release(context.WithoutCancel(ctx), lease); err != nil {/		if err := func() error { _ = lease; return nil }(); err != nil {/' ;;
quota) plant sdk/otapush/client.go 's/^		if attempt > 1 || !req.Reserved {/		if attempt > 1 {\n			req.Quota = nil\n		}\n		if attempt > 1 || !req.Reserved {/' ;;
compact) plant sdk/pipeline/lane/compact.go 's/			m.Sequence = max(m.Sequence, e.Sequence)/			m.Sequence = min(m.Sequence, e.Sequence)/' ;;
retryafter) plant sdk/otapush/answer.go 's/^	return wait$/	return c.policy.DefaultRetryAfter/' ;;
*) echo "plant.sh: no plant $bug: want margin, lease, quota, compact or retryafter" >&2; exit 2 ;;
esac
go vet ./sdk/...

out=${FLEETBUCKET_SIM_OUT:-/tmp}
mkdir -p "$out"
log=$out/plant-$bug.log
start=$SECONDS
status=0
FLEETBUCKET_ADVERSARY=1 FLEETBUCKET_ADVERSARY_SEEDS=$seeds FLEETBUCKET_ADVERSARY_STOP=1 FLEETBUCKET_SIM_OUT="$tmp" GOGC=${GOGC:-400} \
	go test -count=1 -timeout 600m -run '^TestAdversaryFull$' -v ./test/sim/ >"$log" 2>&1 || status=$?
echo "plant $bug, seeds 1-$seeds: $((SECONDS - start)) s, log $log"
ran=$(grep -c '^case scripts' "$log" || true)
if grep -q '^FAIL scripts' "$log"; then
	# The summary at the end: the case, its smallest case, what it broke.
	grep -v 'shrinking' "$log" | grep -A2 '^FAIL scripts' | tail -3
	echo "cases run: $ran"
	exit 0
fi
echo "no case failed in $ran cases (exit $status)"
exit 1
