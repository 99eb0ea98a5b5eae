#!/usr/bin/env bats
# Where a secret given to lcrun goes: to the command that asked for it and
# nowhere else, not to the helpers that outlive the run (the remover,
# lcrun-net, the spare namespaces' holder lcrun-netspare, which may stay
# for 10 s).  Runs as root; reads those helpers' memory.

load ../integration/helpers
load ../integration/lcd-lib

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root"
	nft list tables >/dev/null 2>&1 || skip "no nftables: a build's run step needs --net open"
	S=$(mktemp -d /tmp/lcrun-sec-secrets.XXXXXX)
	# a state directory of its own: the first remover of this test's runs
	# becomes the holder of its spare namespaces
	export LCRUN_ROOT=$S/root LCRUN_STATE_DIR=$S/state
	SECRET=lcrun-build-secret-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
	mkdir -p "$S/def"
	cat >"$S/def/step.json" <<-'EOF'
		{ "name": "secret-step", "from": "host",
		  "steps": [ { "run": "test \"${#BUILD_TOKEN}\" -gt 20 && echo \"token of ${#BUILD_TOKEN}\" >/token-seen && sleep 2" } ] }
	EOF
}

teardown() {
	"$LCRUN" gc --spares >/dev/null 2>&1 || true
	"$LCRUN" gc --wait >/dev/null 2>&1 || true
	rm -rf "$S"
}

# Processes named NAME with a file of this test's state directory open.
ours() { # NAME
	local p
	for p in $(pgrep -x "$1"); do
		ls -l "/proc/$p/fd" 2>/dev/null | grep -q " -> $LCRUN_STATE_DIR/" && echo "$p"
	done
	true
}

# A build (in the background) whose run step sleeps a moment: the step's
# sandbox is torn down by a helper forked from the build's process
# (lcrun-net removes its veth, chains and lease).  The pool's lock, held
# here once the step runs, keeps that helper alive while its memory is
# read: it must hold none of TEXT.  Then the build must finish.
build_helpers_clean_of() { # TEXT BUILD-ARGS…
	local text=$1 pid pids held
	shift
	"$@" >"$S/build.out" 2>&1 &
	pid=$!
	for _ in $(seq 300); do
		[ "$("$LCRUN" ps --json 2>/dev/null | jq 'map(select(.state == "running")) | length')" = 1 ] && break
		sleep 0.1
	done
	exec 9>"$LCRUN_STATE_DIR/net/pool.lock"
	flock 9
	# this state directory's helpers: those with a file of it open
	for _ in $(seq 300); do
		pids=$(ours lcrun-net)
		[ -n "$pids" ] && break
		sleep 0.05
	done
	pids="$pids $(ours lcrun-rm) $(ours lcrun-netspare)"
	echo "left: $pids"
	held=$(procs_holding "$text" $pids)
	exec 9>&-
	wait "$pid"
	local rc=$?
	cat "$S/build.out"
	[ "$rc" -eq 0 ]
	echo "$held"
	[ -n "$held" ]
	if echo "$held" | grep -q '^held \|^unreadable '; then false; fi
	# the step had it
	run "$LCRUN" run --image secret-step -- cat /token-seen
	[ "$output" = "token of ${#text}" ]
}

@test "image build --secret NAME=VALUE: the helpers its run steps leave hold none of it" {
	build_helpers_clean_of "$SECRET" "$LCRUN" image build "$S/def/step.json" --secret "BUILD_TOKEN=$SECRET"
}

@test "image build --secret NAME (from lcrun's environment): the helpers hold none of it" {
	build_helpers_clean_of "$SECRET" env BUILD_TOKEN="$SECRET" "$LCRUN" image build "$S/def/step.json" --secret BUILD_TOKEN
}
