# Shared set-up for the integration suite (bats, run as root).
#
# LCRUN is the lcrun binary under test (default: the build tree's).  Every
# test can call host_snapshot before and assert_host_clean after, which
# compares what a sandbox may leave on the host: mounts, cgroups, network
# namespaces and links, sandbox directories and state.

: "${LCRUN:=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)/build/lcrun}"
export LCRUN
LCRUN_LIB=${LCRUN_ROOT:-/var/lib/lcrun}
LCRUN_RUN=${LCRUN_STATE_DIR:-/run/lcrun}

cgroup2_root() {
	awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo
}

host_state() {
	echo "== mounts"
	awk '{ print $5, $9 }' /proc/self/mountinfo | sort
	echo "== cgroups"
	local cg
	cg=$(cgroup2_root)
	[ -n "$cg" ] && [ -d "$cg/lcrun" ] && find "$cg/lcrun" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort
	echo "== netns"
	ip netns list 2>/dev/null | awk '{ print $1 }' | sort
	echo "== links"
	ip -o link show | awk -F': ' '{ print $2 }' | sed 's/@.*//' | sort
	echo "== sandboxes"
	[ -d "$LCRUN_LIB/sandboxes" ] && ls -1 "$LCRUN_LIB/sandboxes" | sort
	echo "== state"
	[ -d "$LCRUN_RUN" ] && find "$LCRUN_RUN" -mindepth 1 -maxdepth 1 ! -name names ! -name net ! -name trash-state ! -name '*.lock' ! -name netspare.sock -printf '%f\n' | sort
	[ -d "$LCRUN_RUN/names" ] && find "$LCRUN_RUN/names" -mindepth 1 -printf 'name %f\n' | sort
	[ -d "$LCRUN_RUN/trash-state" ] && find "$LCRUN_RUN/trash-state" -mindepth 1 -maxdepth 1 -printf 'state in trash %f\n' | sort
	echo "== nft"
	nft list table inet lcrun 2>/dev/null | grep -E '^\s*chain ' | sort
	true
}

# A run's state directory waits in trash-state/ for its remover, a moment
# after run returned (docs/design/sandbox.md, "The end of a run"): wait for those, 5 s at most.
state_settle() {
	for _ in $(seq 50); do
		[ -z "$(ls -A "${LCRUN_STATE_DIR:-/run/lcrun}/trash-state" "$LCRUN_RUN/trash-state" 2>/dev/null | grep -v -e '^$' -e ':$')" ] && break
		sleep 0.1
	done
	true
}

# An earlier test's removers (lcrun-rm, lcrun-net: a sandbox's cgroup,
# chains and directories, a moment after its run or its lcd ended) may
# still be at work when the next test looks at the host: wait for them
# (zombies aside: this machine's pid 1 may leave them), 15 s at most.
# Under tests/run-job, only this job's (those in its cgroup namespace: a
# process outside it has a cgroup path starting "/..").
removers_settle() {
	local p busy
	for _ in $(seq 150); do
		busy=
		for p in $(ps -eo pid=,stat=,comm= | awk '$2 !~ /^Z/ && ($3 == "lcrun-rm" || $3 == "lcrun-net") { print $1 }'); do
			if [ -n "${LCRUN_TEST_JOB:-}" ] && grep -q '^0::/\.\.' "/proc/$p/cgroup" 2>/dev/null; then
				continue
			fi
			busy=1
		done
		[ -n "$busy" ] || break
		sleep 0.1
	done
	true
}

host_snapshot() {
	removers_settle
	state_settle
	host_state > "$BATS_TEST_TMPDIR/host.before"
}

# Wait (without collecting anything) for the helpers that remove what
# runs left of their networks for a moment: each holds an flock on a file
# net/pending.N of the state directory it ran with (lcrun(1), NETWORK).
# flock -w bounds the wait; a helper that never finishes is a failure of
# the check that follows.
net_settle() {
	local f
	for f in "${LCRUN_STATE_DIR:-/run/lcrun}"/net/pending.* "$LCRUN_RUN"/net/pending.* "$@"; do
		[ -e "$f" ] && flock -s -w 10 "$f" true
	done
	true
}

assert_host_clean() {
	net_settle
	state_settle
	host_state > "$BATS_TEST_TMPDIR/host.after"
	if ! diff -u "$BATS_TEST_TMPDIR/host.before" "$BATS_TEST_TMPDIR/host.after"; then
		echo "the host changed (see the diff above)" >&2
		return 1
	fi
}

# A user for rootless tests.
rootless_user() {
	id lcrun-test >/dev/null 2>&1 || useradd --system --create-home --home-dir /var/tmp/lcrun-test-home \
		--shell /bin/sh lcrun-test >/dev/null 2>&1
	echo lcrun-test
}

# A copy of lcrun and of the policies that an unprivileged user can run,
# in a fresh directory $RL (the test removes it); rootless_lcrun ARGS runs
# it as the rootless user.
rootless_copy() {
	RL=$(mktemp -d /tmp/lcrun-rootless.XXXXXX)
	chmod 755 "$RL"
	cp "$LCRUN" "$RL/lcrun"
	cp -r "$(cd "$BATS_TEST_DIRNAME/../.." && pwd)/policies" "$RL/policies"
	chmod -R a+rX "$RL"
}

rootless_lcrun() {
	as_user "$(rootless_user)" env LCRUN_POLICY_DIR="$RL/policies" "$RL/lcrun" "$@"
}

as_user() {
	local user=$1
	shift
	# shellcheck disable=SC2145
	runuser -u "$user" -- env HOME="$(getent passwd "$user" | cut -d: -f6)" "$@"
}

# The controllers the host's cgroup v2 root offers.
have_controller() {
	local cg
	cg=$(cgroup2_root)
	[ -n "$cg" ] && grep -qw "$1" "$cg/cgroup.controllers"
}
