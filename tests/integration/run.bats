#!/usr/bin/env bats
# lcrun run: the sandbox a user gets, checked from inside and from the host.

load helpers

setup() {
	host_snapshot
}

teardown() {
	assert_host_clean
}

@test "pid 1 is lcrun's init and host processes are invisible" {
	run "$LCRUN" run -- sh -c 'cat /proc/1/comm; ls /proc | grep -c "^[0-9]"'
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "lcrun-init" ]
	# init, sh, ls, grep: a handful, not the host's hundreds
	[ "${lines[1]}" -lt 10 ]
}

@test "uid_map maps root to the unprivileged range, and the user is root inside" {
	run "$LCRUN" run -- sh -c 'id -u; cat /proc/self/uid_map; cat /proc/self/gid_map'
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = 0 ]
	[ "$(echo ${lines[1]})" = "0 1000000000 65536" ]
	[ "$(echo ${lines[2]})" = "0 1000000000 65536" ]
}

@test "each run has a user namespace of its own: a child of the host's, owned by host root, not another run's" {
	"$LCRUN" run -- sh -c 'readlink /proc/self/ns/user; exec sleep 5' >"$BATS_TEST_TMPDIR/a" &
	"$LCRUN" run -- sh -c 'readlink /proc/self/ns/user; exec sleep 5' >"$BATS_TEST_TMPDIR/b" &
	for _ in $(seq 100); do [ -s "$BATS_TEST_TMPDIR/a" ] && [ -s "$BATS_TEST_TMPDIR/b" ] && break; sleep 0.1; done
	a=$(cat "$BATS_TEST_TMPDIR/a") b=$(cat "$BATS_TEST_TMPDIR/b")
	[[ "$a" == user:* ]] && [[ "$b" == user:* ]]
	[ "$a" != "$b" ]
	[ "$a" != "$(readlink /proc/self/ns/user)" ]
	local found=
	for pid in $(pgrep -x sleep); do
		[ "$(readlink /proc/$pid/ns/user)" = "$a" ] || continue
		# NS_GET_PARENT: the host's user namespace; NS_GET_OWNER_UID: host root
		run python3 -c 'import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
parent = fcntl.ioctl(fd, 0xb702)
print(os.fstat(parent).st_ino == os.stat("/proc/self/ns/user").st_ino,
      struct.unpack("I", fcntl.ioctl(fd, 0xb704, bytes(4)))[0])' "/proc/$pid/ns/user"
		[ "$output" = "True 0" ]
		found=1
	done
	kill %1 %2 2>/dev/null || true
	wait
	[ "$found" = 1 ]
}

@test "capabilities, no_new_privs and seccomp are what lcrun sets" {
	run "$LCRUN" run -- grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status
	[ "$status" -eq 0 ]
	[[ "$output" == *"CapEff:	00000000a80425fb"* ]]
	[[ "$output" == *"CapBnd:	00000000a80425fb"* ]]
	[[ "$output" == *"NoNewPrivs:	1"* ]]
	[[ "$output" == *"Seccomp:	2"* ]]
	run "$LCRUN" run --cap-drop all -- grep CapEff /proc/self/status
	[[ "$output" == *"0000000000000000"* ]]
	run "$LCRUN" run --cap-add SYS_PTRACE --cap-drop NET_RAW -- grep CapEff /proc/self/status
	[[ "$output" == *"00000000a80c05fb"* ]]
	run "$LCRUN" run --user 1000:1000 -- grep CapEff /proc/self/status
	[[ "$output" == *"0000000000000000"* ]]
}

@test "mount, keyctl, unshare -U, insmod and ptrace of pid 1 fail inside" {
	run "$LCRUN" run -- mount -t tmpfs none /mnt
	[ "$status" -ne 0 ]
	run "$LCRUN" run -- unshare -U true
	[ "$status" -ne 0 ]
	run "$LCRUN" run -- insmod /nonexistent.ko
	[ "$status" -ne 0 ]
	# keyctl(KEYCTL_GET_KEYRING_ID) and ptrace(PTRACE_ATTACH, 1) straight
	# from the syscall interface, so no tool can paper over the result.
	run "$LCRUN" run -- python3 -c '
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
r = libc.syscall(250, 0, -1, 0)
print("keyctl", r, os.strerror(ctypes.get_errno()))
r = libc.ptrace(16, 1, 0, 0)
print("ptrace", r, os.strerror(ctypes.get_errno()))
'
	[ "$status" -eq 0 ]
	[[ "${lines[0]}" == "keyctl -1 "* ]]
	[[ "${lines[1]}" == "ptrace -1 "* ]]
	# pid 1 is not dumpable: its memory and environment stay closed
	run "$LCRUN" run -- cat /proc/1/environ
	[ "$status" -ne 0 ]
}

@test "the host's secrets and home directories are absent" {
	marker="/root/.lcrun-marker-$$"
	touch "$marker"
	run "$LCRUN" run -- sh -c "ls -A /root /home; test -e /etc/shadow && echo shadow; test -e /work && echo work; test -e /etc/ssh && echo ssh; ls /var"
	rm -f "$marker"
	[ "$status" -eq 0 ]
	[[ "$output" != *"lcrun-marker"* ]]
	[[ "$output" != *shadow* ]]
	[[ "$output" != *work* ]]
	[[ "$output" != *ssh* ]]
}

@test "writes to /usr land in the upper layer and the host is unchanged" {
	run "$LCRUN" run --keep -- sh -c "echo sandbox > /usr/lcrun-test-$$ && cat /usr/lcrun-test-$$ && rm /usr/bin/true && ! test -e /usr/bin/true"
	id=$(echo "$output" | sed -n 's/^lcrun: kept sandbox //p')
	[ -n "$id" ]
	idmapped=$(jq -r .idmapped "$LCRUN_RUN/$id/state.json")
	upper="$LCRUN_LIB/sandboxes/$id/private/ovl/usr-upper"
	content=$(cat "$upper/lcrun-test-$$" 2>/dev/null || true)
	whiteout=$(stat -c '%F %t:%T' "$upper/bin/true" 2>/dev/null || true)
	rm -rf "$LCRUN_LIB/sandboxes/$id" "$LCRUN_RUN/$id"
	[ ! -e "/usr/lcrun-test-$$" ]
	[ -x /usr/bin/true ]
	if [ "$idmapped" = false ]; then
		# 9p (the VM suite's root) cannot be idmapped: /usr is read-only to root inside
		skip "this host's /usr cannot be idmapped; root inside cannot write to it"
	fi
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = sandbox ]
	[ "$content" = sandbox ]
	# the deletion is a whiteout (0/0 character device) in the upper layer
	[ "$whiteout" = "character special file 0:0" ]
}

@test "a run's throwaway uppers skip the sync at unmount; kept ones keep it" {
	# overlay's volatile: nothing of a run without --keep outlives it
	run "$LCRUN" run -- sh -c 'grep -c " overlay .*fsync=volatile" /proc/self/mountinfo'
	[ "$status" -eq 0 ]
	[ "$output" = 2 ]
	run "$LCRUN" run --keep -- sh -c 'grep -c "fsync=volatile" /proc/self/mountinfo'
	id=$(echo "$output" | sed -n 's/^lcrun: kept sandbox //p')
	[ -n "$id" ]
	rm -rf "$LCRUN_LIB/sandboxes/$id" "$LCRUN_RUN/$id"
	[ "${lines[0]}" = 0 ]
}

@test "exit codes propagate: status, signals, not found, not executable" {
	run "$LCRUN" run -- sh -c 'exit 3'
	[ "$status" -eq 3 ]
	run "$LCRUN" run -- sh -c 'kill -TERM $$'
	[ "$status" -eq 143 ]
	run -127 "$LCRUN" run -- /no/such/command
	[[ "$output" == "lcrun: /no/such/command: command not found" ]]
	run -126 "$LCRUN" run -- /etc/hostname
}

@test "SIGTERM to lcrun reaches the command" {
	"$LCRUN" run -- sh -c 'trap "echo got-term; exit 42" TERM; echo ready; while :; do sleep 0.1; done' > "$BATS_TEST_TMPDIR/out" &
	pid=$!
	for _ in $(seq 100); do grep -q ready "$BATS_TEST_TMPDIR/out" && break; sleep 0.1; done
	kill -TERM "$pid"
	rc=0
	wait "$pid" || rc=$?
	[ "$rc" -eq 42 ]
	grep -q got-term "$BATS_TEST_TMPDIR/out"
}

@test "orphaned zombies are reaped by the init" {
	run "$LCRUN" run -- sh -c 'for i in 1 2 3 4 5; do sh -c "sleep 0.1 &"; done; sleep 1; ps -eo stat= | grep -c "^Z" || true'
	[ "$status" -eq 0 ]
	[ "${lines[-1]}" = 0 ]
}

@test "--timeout kills the whole sandbox, a double-forked daemon included" {
	run "$LCRUN" run --timeout 2 -- sh -c 'setsid sh -c "exec sleep 4321" < /dev/null > /dev/null 2>&1 & exec sleep 4322'
	[ "$status" -eq 124 ]
	[[ "$output" == *"timed out after 2 s"* ]]
	if pgrep -f "sleep 432[12]"; then false; fi
}

@test "--env, --env-file, --workdir, --hostname and a clean environment" {
	printf 'A=1\n# comment\nB=two words\n' > "$BATS_TEST_TMPDIR/env"
	HOSTVAR=leak run "$LCRUN" run --env C=3 --env-file "$BATS_TEST_TMPDIR/env" --workdir /tmp --hostname box -- sh -c 'env | sort; pwd; hostname'
	[ "$status" -eq 0 ]
	[[ "$output" == *"A=1"* ]]
	[[ "$output" == *"B=two words"* ]]
	[[ "$output" == *"C=3"* ]]
	[[ "$output" != *HOSTVAR* ]]
	[[ "$output" == *"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"* ]]
	[ "${lines[-2]}" = /tmp ]
	[ "${lines[-1]}" = box ]
}

@test "--bind (rw and ro), --tmpfs and --user" {
	mkdir -p "$BATS_TEST_TMPDIR/share"
	echo host > "$BATS_TEST_TMPDIR/share/in"
	chmod 777 "$BATS_TEST_TMPDIR/share"
	run "$LCRUN" run --bind "$BATS_TEST_TMPDIR/share:/data" --ro-bind "$BATS_TEST_TMPDIR/share:/ro" --tmpfs /scratch \
		-- sh -c 'cat /data/in; echo sandbox > /data/out; echo x > /ro/y 2>/dev/null && echo ro-writable; touch /scratch/z && echo scratch'
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = host ]
	[[ "$output" != *ro-writable* ]]
	[[ "$output" == *scratch* ]]
	[ "$(cat "$BATS_TEST_TMPDIR/share/out")" = sandbox ]
	run "$LCRUN" run --user 1000:1000 -- sh -c 'id -u; id -g; echo $HOME'
	[ "${lines[0]}" = 1000 ]
	[ "${lines[1]}" = 1000 ]
	[ "${lines[2]}" = /home/user ]
}

@test "/proc and /sys: masked and read-only paths" {
	run "$LCRUN" run -- sh -c 'wc -c < /proc/timer_list; echo 1 > /proc/sys/kernel/domainname && echo procsys-writable; touch /sys/x 2>/dev/null && echo sys-writable; ls /sys/class/net'
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = 0 ]
	[[ "$output" != *writable* ]]
	# sysfs shows the sandbox's own network namespace: loopback only
	[ "${lines[-1]}" = lo ]
}

@test "--ulimit sets rlimits" {
	run "$LCRUN" run --ulimit nofile=100:200 -- sh -c 'ulimit -n; ulimit -Hn'
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = 100 ]
	[ "${lines[1]}" = 200 ]
}

@test "--result writes the exit code, the signal, wall time and the id" {
	run "$LCRUN" run --result "$BATS_TEST_TMPDIR/r.json" -- sh -c 'kill -KILL $$'
	[ "$status" -eq 137 ]
	run jq -r '[.exit_code, .signal, (.wall_time_s > 0), (.id | length)] | @tsv' "$BATS_TEST_TMPDIR/r.json"
	[ "$output" = "$(printf '137\t9\ttrue\t12')" ]
}

@test "--rootfs runs on a directory of its own" {
	root="$BATS_TEST_TMPDIR/rootfs"
	mkdir -p "$root/bin"
	cp /bin/busybox "$root/bin/busybox"
	for t in sh ls cat echo; do ln -s busybox "$root/bin/$t"; done
	run "$LCRUN" run --rootfs "$root" -- /bin/sh -c 'ls /; cat /etc/hostname; echo written > /new'
	[ "$status" -eq 0 ]
	[[ "$output" == *bin* ]]
	[[ "$output" == *lcrun* ]]
	[ ! -e "$root/new" ]
}

@test "bad input: one line naming the problem, a distinct exit code, nothing left behind" {
	run "$LCRUN" run --no-such-option -- true
	[ "$status" -eq 123 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == "lcrun: unknown option '--no-such-option'"* ]]

	run "$LCRUN" run --rootfs /no/such/dir -- true
	[ "$status" -eq 122 ]
	[[ "$output" == "lcrun: rootfs /no/such/dir: No such file or directory" ]]

	run "$LCRUN" run --bind /no/such/src:/x -- true
	[ "$status" -eq 122 ]
	[[ "$output" == "lcrun: bind source /no/such/src: No such file or directory" ]]

	run "$LCRUN" run --workdir /no/such/wd -- true
	[ "$status" -eq 122 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == *"workdir /no/such/wd does not exist in the sandbox"* ]]

	printf '{\n  "defaultAction": "SCMP_ACT_ERRNO",\n  oops\n}\n' > "$BATS_TEST_TMPDIR/bad.json"
	run "$LCRUN" run --seccomp "$BATS_TEST_TMPDIR/bad.json" -- true
	[ "$status" -eq 121 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == *"bad.json:3:"* ]]

	printf '{\n  "defaultAction": "SCMP_ACT_ERRNO",\n  "syscalls": [\n    { "names": ["read", "no_such_call"], "action": "SCMP_ACT_ALLOW" }\n  ]\n}\n' > "$BATS_TEST_TMPDIR/unk.json"
	run "$LCRUN" run --seccomp "$BATS_TEST_TMPDIR/unk.json" -- true
	[ "$status" -eq 121 ]
	[[ "$output" == *"no_such_call"* ]]
	[[ "$output" == *"unk.json:4:"* ]]

	run "$LCRUN" run --memory lots -- true
	[ "$status" -eq 123 ]
	run "$LCRUN" run --timeout -3 -- true
	[ "$status" -eq 123 ]
	run "$LCRUN" run
	[ "$status" -eq 123 ]
}

@test "rootless: an unprivileged user gets a sandbox with a single-id mapping" {
	user=$(rootless_user)
	rootless_copy
	run rootless_lcrun run -- sh -c 'id -u; cat /proc/self/uid_map; grep Seccomp: /proc/self/status'
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = 0 ]
	[ "$(echo ${lines[1]})" = "0 $(id -u "$user") 1" ]
	[[ "${lines[2]}" == *2 ]]
	run rootless_lcrun run --memory 64M -- true
	[ "$status" -eq 118 ]
	[[ "$output" == *"needs root"* ]]
	run rootless_lcrun run --user 5 -- true
	[ "$status" -eq 118 ]
	rm -rf "$RL"
}

@test "a script without #! and 60,000 arguments runs (execvp's /bin/sh fallback copies argv on the command's first stack)" {
	d=$(mktemp -d /tmp/lcrun-bats-run.XXXXXX)
	printf 'echo script ran with $# args\n' >"$d/noshebang.sh"
	chmod 755 "$d/noshebang.sh"
	run "$LCRUN" run --bind "$d/noshebang.sh:/s.sh" -- /s.sh $(seq 1 60000)
	rm -rf "$d"
	[ "$status" -eq 0 ]
	[ "$output" = "script ran with 60000 args" ]
}

@test "pid 1's own error reaches lcrun every time, though it dies with a word of lcrun's unread (200 tries)" {
	# pid 1 fails on the workdir before it reads lcrun's last GO: the
	# kernel then reports ECONNRESET ahead of pid 1's ERROR, which
	# lcrun must still read
	for i in $(seq 200); do
		run "$LCRUN" run --workdir /no/such/wd -- true
		[ "$status" -eq 122 ] || { echo "try $i: $status $output" >&2; false; }
		[[ "$output" == *"workdir /no/such/wd does not exist in the sandbox"* ]]
	done
}

@test "a run whose name is taken fails in one line and runs nothing of its command (20 tries)" {
	local out=$BATS_TEST_TMPDIR/out
	mkdir -p "$out"
	"$LCRUN" run --name "held-$$" -- sleep 30 &
	local holder=$!
	for _ in $(seq 100); do [ -L "${LCRUN_STATE_DIR:-/run/lcrun}/names/held-$$" ] && break; sleep 0.1; done
	for i in $(seq 20); do
		run "$LCRUN" run --name "held-$$" --bind "$out:/out" -- touch "/out/ran-$i"
		[ "$status" -eq 119 ]
		[ "${#lines[@]}" -eq 1 ]
		[[ "$output" == *"held-$$"*"taken"* ]]
	done
	# the command of none of them ran, even for a moment
	[ -z "$(ls "$out")" ]
	kill "$holder"
	wait "$holder" || true
}

@test "back-to-back runs on one --upper-dir: each finds the last one's overlay gone (no upper in use twice)" {
	d=$(mktemp -d /tmp/lcrun-bats-run.XXXXXX)
	up="$d/up"
	mkdir "$up"
	before=$(dmesg | grep -c "is in-use as upperdir/workdir of another mount" || true)
	for i in $(seq 20); do
		"$LCRUN" run --upper-dir "$up" -- sh -c "echo $i >> /root/count"
	done
	run "$LCRUN" run --upper-dir "$up" -- wc -l /root/count
	rm -rf "$d"
	[ "$output" = "20 /root/count" ]
	after=$(dmesg | grep -c "is in-use as upperdir/workdir of another mount" || true)
	[ "$after" -eq "$before" ]
}
