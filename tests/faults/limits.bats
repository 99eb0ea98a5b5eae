#!/usr/bin/env bats
bats_require_minimum_version 1.5.0
# Kernel limits: out of user namespaces, out of network namespaces, out
# of processes.  Each refusal is one line naming the limit, not a hang
# (every run under `timeout`), and the next run works once the limit
# clears.  The namespace limits are set in a user namespace of the test's
# own (user.max_*_namespaces are per user namespace and bind everything
# made inside it), never on the host's; lcrun runs rootless there, as the
# rootless tests' user.  The process limit is that user's RLIMIT_NPROC.
# Root; no test build needed.

load faults-lib

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root"
	command -v unshare >/dev/null && command -v setpriv >/dev/null && command -v prlimit >/dev/null ||
		skip "needs unshare, setpriv and prlimit (util-linux)"
	F=$(mktemp -d /tmp/lcrun-limits.XXXXXX)
	chmod 755 "$F"
	rootless_copy
	RU=$(rootless_user)
	U=$(id -u "$RU") G=$(id -g "$RU")
	HOME_RL=$(getent passwd "$RU" | cut -d: -f6)
}

teardown() {
	[ -z "${RL:-}" ] || rm -rf "$RL"
	if [ -n "${OWN_STORE:-}" ]; then
		# (the spare network namespaces' holder too: it would keep a
		# cgroup of the test's busy)
		timeout 30 "$LCRUN" gc --spares >/dev/null 2>&1 || true
		[ -z "${PIDS_CG:-}" ] || pids_cgroup_remove
		faults_teardown
	fi
	[ -z "${F:-}" ] || rm -rf "$F"
}

# Root's lcrun with a store and a state directory of the test's own (the
# invariants of faults-lib.bash are checked on them).
own_store() {
	OWN_STORE=1
	export LCRUN_ROOT="$F/root" LCRUN_STATE_DIR="$F/state"
	SEEN_IDS=
}

# Run the shell lines of SCRIPT as root of a new user namespace that maps
# root and the rootless user to themselves; `rl ARGS` there runs lcrun as
# that user (60 s at most).  Its output is in $F/ns.out.
in_own_userns() { # SCRIPT
	{
		echo "rl() { setpriv --reuid $U --regid $G --clear-groups env HOME=$HOME_RL LCRUN_POLICY_DIR=$RL/policies timeout -k 5 60 $RL/lcrun \"\$@\"; }"
		echo "$1"
	} >"$F/inner.sh"
	rm -f "$F/go"
	mkfifo "$F/go"
	# (the maps are written from here, root of the host's namespace; the
	# script is exec'd after that, so that it is root with its powers in
	# the new namespace)
	unshare --user sh -c 'read x <"$1"; exec sh "$2"' sh "$F/go" "$F/inner.sh" >"$F/ns.out" 2>&1 &
	local p=$! own
	own=$(readlink /proc/self/ns/user)
	for _ in $(seq 100); do
		[ "$(readlink "/proc/$p/ns/user" 2>/dev/null)" != "$own" ] && break
		sleep 0.02
	done
	printf '0 0 1\n%s %s 1\n' "$U" "$U" >"$F/map"
	cat "$F/map" >"/proc/$p/uid_map"
	printf '0 0 1\n%s %s 1\n' "$G" "$G" >"$F/map"
	cat "$F/map" >"/proc/$p/gid_map"
	echo go >"$F/go"
	wait "$p"
}

# The result of one refused run: status in $F/rcN, stderr in $F/errN.
refused_saying() { # N TEXT
	cat "$F/err$1" >&2
	local rc
	rc=$(cat "$F/rc$1")
	[ "$rc" -ne 0 ]
	[ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] # not a hang cut short by timeout
	[ "$(wc -l <"$F/err$1")" -eq 1 ]
	grep -q "^lcrun: .*$2" "$F/err$1"
	[ ! -s "$F/out$1" ]
}

@test "limits: user.max_user_namespaces reached: one line naming it, no hang; the next run works once it is raised" {
	in_own_userns "
		echo 0 >/proc/sys/user/max_user_namespaces
		rl run -- echo ran >$F/out1 2>$F/err1; echo \$? >$F/rc1
		echo 100 >/proc/sys/user/max_user_namespaces
		rl run -- echo ran >$F/out2 2>$F/err2; echo \$? >$F/rc2"
	cat "$F/ns.out"
	refused_saying 1 "user.max_user_namespaces"
	grep -q "No space left on device" "$F/err1"
	[ "$(cat "$F/rc2")" -eq 0 ]
	[ "$(cat "$F/out2")" = ran ]
}

@test "limits: user.max_net_namespaces reached: one line naming it, no hang; the next run works once it is raised" {
	in_own_userns "
		echo 0 >/proc/sys/user/max_net_namespaces
		rl run -- echo ran >$F/out1 2>$F/err1; echo \$? >$F/rc1
		echo 100 >/proc/sys/user/max_net_namespaces
		rl run -- echo ran >$F/out2 2>$F/err2; echo \$? >$F/rc2"
	cat "$F/ns.out"
	refused_saying 1 "user.max_net_namespaces"
	[ "$(cat "$F/rc2")" -eq 0 ]
	[ "$(cat "$F/out2")" = ran ]
}

# A uid of the test's own (no account: nobody else's processes count
# against its limit), so that which fork meets the limit is known: lcrun's
# first (N=1), then pid 1's clone (N=2).
@test "limits: out of processes (RLIMIT_NPROC): one line saying so, no hang; the next run works without the limit" {
	local uid=$((4000000 + RANDOM)) n
	mkdir -p "$F/home"
	chown "$uid:$uid" "$F/home"
	nuid() { # ARGS: lcrun as $uid
		timeout -k 5 60 setpriv --reuid "$uid" --regid "$uid" --clear-groups env HOME="$F/home" \
			LCRUN_STATE_DIR="$F/home/state" LCRUN_ROOT="$F/home/root" LCRUN_POLICY_DIR="$RL/policies" "$@"
	}
	for n in 1 2; do
		nuid prlimit --nproc="$n" "$RL/lcrun" run -- echo ran >"$F/out$n" 2>"$F/err$n" && echo 0 >"$F/rc$n" ||
			echo $? >"$F/rc$n"
		refused_saying "$n" "Resource temporarily unavailable"
	done
	grep -q "^lcrun: cannot fork" "$F/err1"
	grep -q "^lcrun: cannot start the sandbox's pid 1: out of processes" "$F/err2"
	run nuid "$RL/lcrun" run -- echo ran
	[ "$status" -eq 0 ]
	[ "$output" = ran ]
}

# The limit met later: with a few processes allowed, lcrun's own (the
# remover it starts once the sandbox runs takes one) and pid 1's may fit
# and the command's not, or not.  Whichever fork meets it, every refused
# run says so in one line: pid 1's account of its command's failed start
# was once dropped, and about one run in eight exited 125 silently.  40
# runs of about 0.1 s each.
@test "limits: RLIMIT_NPROC met late (4 or 5 processes): every refused run says so in one line" {
	local uid=$((4000000 + RANDOM)) i n rc refused=0
	mkdir -p "$F/home"
	chown "$uid:$uid" "$F/home"
	for i in $(seq 40); do
		n=$((4 + i % 2))
		rc=0
		timeout -k 5 60 setpriv --reuid "$uid" --regid "$uid" --clear-groups env HOME="$F/home" \
			LCRUN_STATE_DIR="$F/home/state" LCRUN_ROOT="$F/home/root" LCRUN_POLICY_DIR="$RL/policies" \
			prlimit --nproc="$n" "$RL/lcrun" run -- echo ran >"$F/out" 2>"$F/err" || rc=$?
		if [ "$rc" -eq 0 ]; then
			[ "$(cat "$F/out")" = ran ]
			continue
		fi
		refused=$((refused + 1))
		echo "run $i (RLIMIT_NPROC $n): exit $rc: $(cat "$F/err")"
		[ "$rc" -ne 124 ] && [ "$rc" -ne 137 ]
		[ "$(wc -l <"$F/err")" -eq 1 ]
		grep -q "^lcrun: .*out of processes.*Resource temporarily unavailable" "$F/err"
		[ ! -s "$F/out" ]
	done
	echo "$refused of 40 runs refused"
	[ "$refused" -gt 0 ]
}

# A refused run of root's lcrun (after `run`: $status, $output, $lines):
# not a hang, one line matching TEXT, nothing on stdout.
root_refused() { # N TEXT
	echo "limit $1: exit $status: $output"
	[ "$status" -ne 0 ] && [ "$status" -ne 124 ] && [ "$status" -ne 137 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "${lines[0]}" =~ ^lcrun:\ .*$2 ]]
}

# lcrun's own fd limit, from a few fds (its first cgroup) to enough for
# a run, twice: while the store's host image is built (the first run
# makes it) and once it is there.  Every refused run says "Too many open
# files" and whose limit it is, in one line; nothing of it is left once
# `lcrun gc` has run; a run without the limit works.
@test "limits: out of fds (lcrun's RLIMIT_NOFILE): one line naming the limit, no hang, nothing left; the next run works" {
	own_store
	local n pass refused=0 lo=4
	# (the fds lcrun is given count too: from the fewest it starts with)
	while ! prlimit --nofile="$lo" "$LCRUN" --version >/dev/null 2>&1; do
		lo=$((lo + 1))
		[ "$lo" -lt 64 ]
	done
	for pass in 1 2; do
		for n in $(seq "$lo" $((lo + 13))); do
			run --separate-stderr timeout -k 5 60 prlimit --nofile="$n" "$LCRUN" run -- echo ran
			if [ "$status" -eq 0 ]; then
				[ "$output" = ran ]
				continue
			fi
			refused=$((refused + 1))
			output=$stderr lines=("${stderr_lines[@]}")
			root_refused "$n" "Too many open files \\(lcrun's open files limit, RLIMIT_NOFILE"
		done
		[ "$pass" = 2 ] || [ "$(timeout 60 "$LCRUN" run -- echo ran)" = ran ]
	done
	[ "$refused" -gt 10 ]
	faults_check
	[ "$(timeout 60 "$LCRUN" run -- echo ran)" = ran ]
}

# A cgroup of the test's own with the pids controller: cgroup v1's pids
# hierarchy where the host has one (every process lcrun starts stays in
# it, the sandbox's too), else the cgroup v2 root's (lcrun's own
# processes: a sandbox's are made in its own cgroup).
pids_cgroup() {
	if [ -f /sys/fs/cgroup/pids/cgroup.procs ]; then
		PIDS_CG=/sys/fs/cgroup/pids/lcfaults-$$-$BATS_TEST_NUMBER
	else
		local cg
		cg=$(cgroup2_root)
		[ -n "$cg" ] && grep -qw pids "$cg/cgroup.controllers" || return 1
		grep -qw pids "$cg/cgroup.subtree_control" || echo +pids >"$cg/cgroup.subtree_control" 2>/dev/null || return 1
		PIDS_CG=$cg/lcfaults-$$-$BATS_TEST_NUMBER
	fi
	mkdir "$PIDS_CG"
}
pids_cgroup_remove() {
	local p
	for p in $(cat "$PIDS_CG/cgroup.procs" 2>/dev/null); do
		echo "left in the test's pids cgroup: $(cat /proc/"$p"/cmdline 2>/dev/null | tr '\0' ' ')" >&2
	done
	for _ in $(seq 50); do rmdir "$PIDS_CG" 2>/dev/null && return 0; sleep 0.1; done
	return 1
}

# Root's lcrun in a cgroup whose pids.max is 1 to 7 (as under a service
# manager's task limit): RLIMIT_NPROC does not bind root, this does.
# Whichever fork meets it (lcrun's, the idmapped mounts' user namespace,
# pid 1's, the command's), the run says so in one line.
@test "limits: a pids limit on root's lcrun (pids.max): one line saying so, no hang, nothing left; the next run works" {
	own_store
	pids_cgroup || skip "no cgroup with the pids controller can be made here"
	"$LCRUN" run -- true # (the host image, made before the limit)
	local n i refused=0
	for n in 1 2 3 4 5 6 7; do
		for i in 1 2 3; do
			echo "$n" >"$PIDS_CG/pids.max"
			run --separate-stderr timeout -k 5 60 sh -c 'echo $$ >"$1/cgroup.procs" && exec "$2" run -- echo ran' sh \
				"$PIDS_CG" "$LCRUN"
			if [ "$status" -eq 0 ]; then
				[ "$output" = ran ]
				continue
			fi
			refused=$((refused + 1))
			output=$stderr lines=("${stderr_lines[@]}")
			root_refused "$n" "out of processes .*Resource temporarily unavailable"
		done
	done
	[ "$refused" -gt 0 ]
	echo max >"$PIDS_CG/pids.max"
	faults_check
	run sh -c 'echo $$ >"$1/cgroup.procs" && exec "$2" run -- echo ran' sh "$PIDS_CG" "$LCRUN"
	[ "$status" -eq 0 ]
	[ "$output" = ran ]
}
