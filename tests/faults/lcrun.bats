#!/usr/bin/env bats
# kill -9 at every step of lcrun's verbs (LCRUN_FAULT, a test build's hook:
# runtime/lib/fault.h), then `lcrun gc` and the invariants of
# faults-lib.bash; and the next identical command must work.  Root; a
# private LCRUN_ROOT and LCRUN_STATE_DIR per test.  A step is named in
# the test's title; steps.bats checks that every LC_FAULT() in the tree is
# named by a test.

load faults-lib

setup() { faults_setup; }
teardown() { faults_teardown; }

NET=(--net allow --allow 192.0.2.1/32)

# After a kill of lcrun run (or fork), no sandbox of it lives on: pid 1
# dies with the process that made it.  5 s at most.
wait_none_live() {
	for _ in $(seq 50); do
		[ -z "$(live_ids)" ] && return 0
		sleep 0.1
	done
	echo "still live after the kill:" >&2
	"$LCRUN" ps >&2
	return 1
}

run_case() { # STEP [OPTIONS of lcrun run]
	local step=$1
	shift
	fault_at "$step" "$LCRUN" run "$@" -- sh -c 'echo ran'
	[ "$FAULT_STATUS" -eq 137 ]
	wait_none_live
	faults_check
	run "$LCRUN" run "$@" -- sh -c 'echo ran'
	[ "$status" -eq 0 ]
	[ "$output" = ran ]
}

@test "faults: run: sandbox-claimed" { run_case sandbox-claimed; }
@test "faults: run: sandbox-cgroup" { run_case sandbox-cgroup; }
@test "faults: run: sandbox-dirs" { run_case sandbox-dirs; }
@test "faults: run: sandbox-state" { run_case sandbox-state; }
@test "faults: run: sandbox-running" { run_case sandbox-running; }
@test "faults: run: teardown-killed" { run_case teardown-killed; }
@test "faults: run: teardown-cgroup" { run_case teardown-cgroup; }
@test "faults: run: teardown-dirs" { run_case teardown-dirs; }
@test "faults: run --net allow: sandbox-net-prepared" { run_case sandbox-net-prepared "${NET[@]}"; }
@test "faults: run --net allow: sandbox-net-attached" { run_case sandbox-net-attached "${NET[@]}"; }
@test "faults: run --net allow: teardown-net" { run_case teardown-net "${NET[@]}"; }

# A sandbox whose monitor was killed ends with it (pid 1 sees its sync
# socket close), a moment later: gc run meanwhile rightly leaves a pid 1
# that still runs.  Wait for such ends (5 s at most), as a user's later
# gc would come after them.
wait_orphans_end() {
	local id mp left
	for _ in $(seq 50); do
		left=
		for id in $(live_ids); do
			mp=$(jq -r '.monitor_pid // empty' "$LCRUN_STATE_DIR/$id/state.json" 2>/dev/null)
			[ -n "$mp" ] && ! kill -0 "$mp" 2>/dev/null && left=1
		done
		[ -z "$left" ] && return 0
		sleep 0.1
	done
}

# create: the sandbox is made by its monitor, a helper of lcrun create; a
# kill of either.  The sandbox, if it is listed, is running or stopped
# (its id was told), never running without its processes.
create_case() { # STEP [OPTIONS of lcrun create]
	local step=$1
	shift
	fault_at "$step" "$LCRUN" create "$@"
	wait_orphans_end
	faults_check
	id=$("$LCRUN" create "$@")
	[ "$("$LCRUN" exec "$id" -- echo ok)" = ok ]
	"$LCRUN" rm -f "$id"
}

@test "faults: create: sandbox-claimed" { create_case sandbox-claimed; }
@test "faults: create: sandbox-state" { create_case sandbox-state; }
@test "faults: create: sandbox-running" { create_case sandbox-running; }
@test "faults: create: create-recorded" { create_case create-recorded; }
@test "faults: create: create-id-received" { create_case create-id-received; }
@test "faults: create: create-acked" { create_case create-acked; }
@test "faults: create: create-confirmed" { create_case create-confirmed; }
@test "faults: create --net allow: sandbox-net-attached" { create_case sandbox-net-attached "${NET[@]}"; }

# rm -f of a created sandbox: its monitor tears it down, lcrun rm purges.
rm_case() { # STEP [OPTIONS of lcrun create]
	local step=$1
	shift
	# the monitor has the environment of its create: the step is reached
	# only at the teardown that rm -f asks of it
	id=$(LCRUN_FAULT=$step LCRUN_FAULT_LOG="$F/fault.log" "$LCRUN" create "$@")
	fault_at "$step" "$LCRUN" rm -f "$id"
	faults_check
	if "$LCRUN" inspect "$id" >/dev/null 2>&1; then
		# a sandbox still listed is removed by the next identical rm
		"$LCRUN" rm -f "$id"
	fi
	faults_check
	id=$("$LCRUN" create "$@")
	"$LCRUN" rm -f "$id"
}

@test "faults: rm -f: teardown-killed" { rm_case teardown-killed; }
@test "faults: rm -f: teardown-cgroup" { rm_case teardown-cgroup; }
@test "faults: rm -f --net allow: teardown-net" { rm_case teardown-net "${NET[@]}"; }

exec_case() { # STEP
	id=$("$LCRUN" create)
	fault_at "$1" "$LCRUN" exec "$id" -- sh -c 'echo x >>/root/count'
	faults_check
	# the sandbox runs on, and the command ran at most once
	[ "$("$LCRUN" exec "$id" -- sh -c 'cat /root/count 2>/dev/null | wc -l')" -le 1 ]
	[ "$("$LCRUN" exec "$id" -- echo ok)" = ok ]
	"$LCRUN" rm -f "$id"
}

@test "faults: exec: exec-prepared" { exec_case exec-prepared; }
@test "faults: exec: exec-helper-joined" { exec_case exec-helper-joined; }
@test "faults: exec: exec-status" { exec_case exec-status; }

# A sandbox with some MB of changes to snapshot.
sandbox_with_changes() { # MB
	local id
	id=$("$LCRUN" create)
	"$LCRUN" exec "$id" -- sh -c "head -c $(($1 * 1000000)) /dev/urandom >/root/big && echo v1 >/root/mark"
	echo "$id"
}

image_listed() { "$LCRUN" image ls --json | jq -e --arg n "$1" '.[] | select(.name == $n)' >/dev/null; }

snapshot_case() { # STEP: killed there, the image is not listed (or whole)
	id=$(sandbox_with_changes 4)
	fault_at "$1" "$LCRUN" snapshot "$id" snap
	[ "$FAULT_STATUS" -eq 137 ]
	faults_check
	if image_listed snap; then
		# recorded before the kill: whole, and it runs
		[ "$("$LCRUN" run --image snap -- cat /root/mark)" = v1 ]
		"$LCRUN" image rm snap
	fi
	# the sandbox runs (not left frozen), the next identical snapshot works
	[ "$(timeout 20 "$LCRUN" exec "$id" -- echo ok)" = ok ]
	"$LCRUN" snapshot "$id" snap
	[ "$("$LCRUN" run --image snap -- cat /root/mark)" = v1 ]
	"$LCRUN" rm -f "$id"
	faults_check
}

@test "faults: snapshot: snapshot-frozen (gc thaws the sandbox)" { snapshot_case snapshot-frozen; }
@test "faults: snapshot: image-layer-written (gc removes the temporary blob)" { snapshot_case image-layer-written; }
@test "faults: snapshot: image-layer-stored" { snapshot_case image-layer-stored; }
@test "faults: snapshot: image-manifest-stored" { snapshot_case image-manifest-stored; }
@test "faults: snapshot: snapshot-committed" { snapshot_case snapshot-committed; }

@test "faults: snapshot killed while frozen: the next snapshot thaws it without gc" {
	id=$(sandbox_with_changes 1)
	fault_at snapshot-frozen "$LCRUN" snapshot "$id" snap
	"$LCRUN" snapshot "$id" snap
	[ "$(timeout 20 "$LCRUN" exec "$id" -- echo ok)" = ok ]
	"$LCRUN" rm -f "$id"
}

fork_case() { # STEP
	id=$(sandbox_with_changes 1)
	"$LCRUN" snapshot "$id" base
	"$LCRUN" rm -f "$id"
	fault_at "$1" "$LCRUN" fork base --count 3 -- cat /root/mark
	[ "$FAULT_STATUS" -eq 137 ]
	wait_none_live
	faults_check
	run "$LCRUN" fork base --count 3 -- cat /root/mark
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | grep -c v1)" -eq 3 ]
}

@test "faults: fork: fork-resolved" { fork_case fork-resolved; }
@test "faults: fork: sandbox-running:2 (the second sandbox running)" { fork_case sandbox-running:2; }
@test "faults: fork: teardown-killed:2" { fork_case teardown-killed:2; }
@test "faults: fork: fork-results" { fork_case fork-results; }

rootfs_tar() { # FILE: a small rootfs tarball
	mkdir -p "$F/src/etc"
	echo imported >"$F/src/etc/mark"
	head -c 2000000 /dev/urandom >"$F/src/etc/big"
	tar -C "$F/src" -cf "$1" .
}

import_case() { # STEP [-]: from a file, or from standard input
	rootfs_tar "$F/r.tar"
	if [ "${2:-}" = - ]; then
		fault_at "$1" sh -c "'$LCRUN' image import - --name imp <'$F/r.tar'"
	else
		fault_at "$1" "$LCRUN" image import "$F/r.tar" --name imp
	fi
	[ "$FAULT_STATUS" -eq 137 ]
	if image_listed imp; then false; fi
	faults_check
	"$LCRUN" image import "$F/r.tar" --name imp
	"$LCRUN" image inspect imp >/dev/null
}

@test "faults: image import: import-stdin-copied" { import_case import-stdin-copied -; }
@test "faults: image import: import-blob-stored" { import_case import-blob-stored; }
@test "faults: image import: image-layer-unpacked" { import_case image-layer-unpacked; }
@test "faults: image import: image-manifest-stored" { import_case image-manifest-stored; }

# A build of two steps (a run step, which needs a sandbox with --net
# open, and a copy); built once as v1, then again as v2 and killed: the
# name stays v1's until v2 is whole.
build_def() { # VERSION
	mkdir -p "$F/def"
	echo "$1" >"$F/def/version"
	cat >"$F/def/b.json" <<-EOF
	{"name": "built", "steps": [{"run": "echo ran-$1 >/ran"}, {"copy": "version", "to": "/version"}]}
	EOF
}

build_case() { # STEP
	build_def v1
	"$LCRUN" image build "$F/def/b.json" >/dev/null 2>&1
	[ "$("$LCRUN" run --image built -- cat /version)" = v1 ]
	build_def v2
	fault_at "$1" "$LCRUN" image build "$F/def/b.json"
	[ "$FAULT_STATUS" -eq 137 ]
	wait_none_live
	faults_check
	# nothing built by the killed build is listed as "built", and the
	# name was not lost
	v=$("$LCRUN" run --image built -- cat /version)
	[ "$v" = v1 ] || [ "$v" = v2 ]
	"$LCRUN" image build "$F/def/b.json" >/dev/null 2>&1
	[ "$("$LCRUN" run --image built -- cat /version)" = v2 ]
	[ "$("$LCRUN" run --image built -- cat /ran)" = ran-v2 ]
}

@test "faults: image build: build-step-ran" { build_case build-step-ran; }
@test "faults: image build: build-step-snapshotted" { build_case build-step-snapshotted; }
@test "faults: image build: image-layer-written" { build_case image-layer-written; }
@test "faults: image build: build-naming (the name moves in one step)" { build_case build-naming; }
