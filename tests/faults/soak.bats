#!/usr/bin/env bats
# The short form of contrib/bench/soak: five minutes of churn through a
# private lcd (10 clients creating, exec'ing, uploading, downloading,
# forking, snapshotting and removing sandboxes; a task spawned every
# second; a devbox holding one SSH session open for the whole run while
# short logins come and go).  What must hold at the end: no request lost
# or failed, lcd's fds and threads and the host's sandboxes and mounts
# back to their start, nothing of any sandbox of the run left (cgroup,
# link, nft chain, state, directory), the long session alive throughout,
# and nothing left once the devbox and its disk are removed.  The hour
# (MINUTES=60 CLIENTS=20) is run by hand: docs/design/faults.md.

load ../integration/helpers

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root"
	for c in ssh ssh-keygen mkfs.ext4 jq curl; do
		command -v "$c" >/dev/null || skip "needs $c"
	done
	F=$(mktemp -d /tmp/lcrun-soak-test.XXXXXX)
}

teardown() {
	[ -n "${F:-}" ] && rm -rf "$F"
}

@test "five minutes of churn through lcd lose no request and leave nothing behind" {
	run env MINUTES="${SOAK_MINUTES:-5}" CLIENTS="${SOAK_CLIENTS:-10}" OUT="$F/out" \
		"$BATS_TEST_DIRNAME/../../contrib/bench/soak" "$(dirname "$LCRUN")"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *" 0 lost (no answer in 120 s), 0 failed"* ]]
	[[ "$output" == *"the long SSH session: lasted the run"* ]]
	[[ "$output" == *"what they left: 0"* ]]
	[[ "$output" == *"removed: 0 sandboxes and mounts of the run left"* ]]
}
