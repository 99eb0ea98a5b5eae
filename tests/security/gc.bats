#!/usr/bin/env bats
# lcrun gc of one state directory and the sandboxes another one records:
# it must not take their directories or their cgroups for debris.  Runs as
# root, on a root and state directories of its own (and, for one refusal,
# the default root, where it makes nothing).

load ../integration/helpers

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root"
	S=$(mktemp -d /var/tmp/lcrun-sec-gc.XXXXXX)
	export LCRUN_ROOT=$S/root
	A=$S/state-a B=$S/state-b
}

teardown() {
	exec 9>&- 2>/dev/null || true
	for st in "$A" "$B"; do
		for id in $(LCRUN_STATE_DIR=$st "$LCRUN" ps --json 2>/dev/null | jq -r '.[].id'); do
			LCRUN_STATE_DIR=$st "$LCRUN" rm -f "$id" >/dev/null 2>&1 || true
		done
		LCRUN_STATE_DIR=$st "$LCRUN" gc --wait >/dev/null 2>&1 || true
	done
	cg=$(cgroup2_root)
	[ -z "$cg" ] || rmdir "$cg/lcrun/0a0b0c0d0e0f" "$cg/lcrun/0a0b0c0d0e10" 2>/dev/null || true
	rm -rf "$S"
}

@test "a sandbox is not made with a state directory other than the one that records its root's sandboxes" {
	# A records the root's sandboxes (the first to make its sandboxes/)
	id=$(LCRUN_STATE_DIR=$A "$LCRUN" create)
	LCRUN_STATE_DIR=$A "$LCRUN" exec "$id" -- sh -c 'echo kept >/root/f'
	LCRUN_STATE_DIR=$A "$LCRUN" stop "$id"
	# B's sandbox would have its directory there with its state in B: A's
	# gc would take that directory, the files of a stopped sandbox, for an
	# orphan (and did)
	run env LCRUN_STATE_DIR="$B" "$LCRUN" create
	echo "$output"
	[ "$status" -eq 123 ]
	[ "${#lines[@]}" -eq 1 ]
	[ "$output" = "lcrun: LCRUN_ROOT $LCRUN_ROOT keeps the sandboxes that $A records, not LCRUN_STATE_DIR $B's: use that state directory with it, or a root of its own" ]
	run env LCRUN_STATE_DIR="$B" "$LCRUN" run -- true
	[ "$status" -eq 123 ]
	[ "$(ls "$LCRUN_ROOT/sandboxes")" = "$id" ]
	# gc of B (which records nothing of the root) still leaves A's alone,
	# and A's stopped sandbox keeps its files
	run env LCRUN_STATE_DIR="$B" "$LCRUN" gc
	[ "$status" -eq 0 ]
	[ -d "$LCRUN_ROOT/sandboxes/$id" ]
	LCRUN_STATE_DIR=$A "$LCRUN" start "$id"
	[ "$(LCRUN_STATE_DIR=$A "$LCRUN" exec "$id" -- cat /root/f)" = kept ]
	# once A is gone (its records with it), the root goes with the next
	# state directory that makes a sandbox there
	LCRUN_STATE_DIR=$A "$LCRUN" rm -f "$id"
	LCRUN_STATE_DIR=$A "$LCRUN" gc --wait >/dev/null
	rm -rf "$A"
	id=$(LCRUN_STATE_DIR=$B "$LCRUN" create)
	[ "$(cat "$LCRUN_ROOT/sandboxes/.state-dir")" = "$B" ]
	LCRUN_STATE_DIR=$B "$LCRUN" rm -f "$id"
	# the default root goes with the default state directory: a private
	# state directory over it is refused before anything is made
	before=$(ls -A /var/lib/lcrun/sandboxes 2>/dev/null || true)
	run env -u LCRUN_ROOT LCRUN_STATE_DIR="$B" "$LCRUN" run -- true
	echo "$output"
	[ "$status" -eq 123 ]
	[[ "$output" == "lcrun: LCRUN_STATE_DIR $B with the default root /var/lib/lcrun, whose sandboxes the default state directory records"* ]]
	[ "$(ls -A /var/lib/lcrun/sandboxes 2>/dev/null || true)" = "$before" ]
}

# A start on a fresh root waits for the host image's skeleton (its
# builder's lock) after its cgroup is made and before its first process:
# held here, that lock keeps it there as long as the test likes.
hold_skeleton_lock() {
	mkdir -p -m 0700 "$LCRUN_ROOT"
	mkdir -p "$LCRUN_ROOT/host"
	find "$LCRUN_ROOT/host" -mindepth 1 -maxdepth 1 -type d -exec rm -rf {} +
	exec 9>"$LCRUN_ROOT/host/.build.lock"
	flock 9
}

wait_for_cgroup() { # ID
	for _ in $(seq 200); do [ -d "$cg/lcrun/$1" ] && break; sleep 0.05; done
	[ -d "$cg/lcrun/$1" ]
}

@test "gc of one state directory leaves another's empty cgroup alone while its sandbox is being made" {
	local id=0a0b0c0d0e0f id2=0a0b0c0d0e10
	cg=$(cgroup2_root)
	[ -n "$cg" ] || skip "no cgroup v2 hierarchy"
	hold_skeleton_lock
	LCRUN_STATE_DIR=$A "$LCRUN" run --id "$id" -- echo ran >"$S/out" 2>"$S/err" 9>&- &
	local pid=$!
	wait_for_cgroup "$id"
	[ -z "$(cat "$cg/lcrun/$id/cgroup.procs")" ]
	# B's gc: an empty cgroup, no state of that id in B
	run env LCRUN_STATE_DIR="$B" "$LCRUN" gc
	echo "$output"
	[ "$status" -eq 0 ]
	[ -d "$cg/lcrun/$id" ]
	[[ "$output" != *"$id"* ]]
	# the run goes on once the skeleton may be built
	exec 9>&-
	wait "$pid"
	cat "$S/err"
	[ "$(cat "$S/out")" = ran ]
	# What a start of A killed there leaves (state directory, empty
	# cgroup) is A's to collect, once the state directory is 10 s old
	hold_skeleton_lock
	LCRUN_STATE_DIR=$A "$LCRUN" run --id "$id2" -- true 9>&- &
	pid=$!
	wait_for_cgroup "$id2"
	kill -9 "$pid"
	wait "$pid" || true
	exec 9>&-
	touch -d '-1 minute' "$A/$id2"
	run env LCRUN_STATE_DIR="$B" "$LCRUN" gc
	[ -d "$cg/lcrun/$id2" ]
	run env LCRUN_STATE_DIR="$A" "$LCRUN" gc
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"removed cgroup $cg/lcrun/$id2"* ]]
	[ ! -d "$cg/lcrun/$id2" ]
}
