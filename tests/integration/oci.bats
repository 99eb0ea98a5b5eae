#!/usr/bin/env bats
bats_require_minimum_version 1.5.0
# lcrun-oci, the OCI runtime: runc's verbs on a bundle, config.json features
# against what the container sees, bad bundles, Podman and containerd
# running their containers on it.  Run as root.  No image is downloaded:
# the root is the host's static busybox, imported into each engine here.
# In the VM suite only the tests that need cgroup v2 controllers run:
# check-vm: yes

load helpers
load oci-lib

setup_file() {
	[ "$(id -u)" = 0 ] || skip "needs root"
	export OCI_DIR="$BATS_FILE_TMPDIR/oci"
	export LCRUN_OCI_ROOT="$OCI_DIR/state"
	export OCI_ROOTFS="$OCI_DIR/rootfs"
	mkdir -p "$OCI_DIR/podman/tmp"
	oci_make_rootfs "$OCI_ROOTFS"
	tar -C "$OCI_ROOTFS" -cf "$OCI_DIR/rootfs.tar" .
	podman_conf "$OCI_DIR/containers.conf"
	# The engines' own stores are made (and their mounts taken) before any
	# test looks at the host; so is ip's /run/netns mount.
	ip netns add "lcrun-oci-w$$" 2>/dev/null && ip netns del "lcrun-oci-w$$" 2>/dev/null || true
	if command -v podman >/dev/null; then
		pod import "$OCI_DIR/rootfs.tar" localhost/lcrun-oci-bb:1 >/dev/null 2>&1 || true
	fi
	if [ "${LCRUN_IN_VM:-}" != 1 ] && command -v containerd >/dev/null && command -v ctr >/dev/null && ctrd_start; then
		LCRUN_ROOT="$OCI_DIR/lcrun" "$LCRUN" image import "$OCI_DIR/rootfs.tar" --name bb >/dev/null 2>&1 &&
			LCRUN_ROOT="$OCI_DIR/lcrun" "$LCRUN" image export bb -o "$OCI_DIR/bb-oci.tar" &&
			ctrc image import --base-name localhost/lcrun-oci-bb --digests "$OCI_DIR/bb-oci.tar" >/dev/null 2>&1 || true
	fi
}

teardown_file() {
	[ -n "${OCI_DIR:-}" ] || return 0
	if [ -S "$OCI_DIR/containerd/sock" ]; then
		local c
		for c in $(ctrc container ls -q 2>/dev/null); do
			ctrc task kill -s SIGKILL "$c" >/dev/null 2>&1 || true
			ctrc task rm -f "$c" >/dev/null 2>&1 || true
			ctrc container rm "$c" >/dev/null 2>&1 || true
		done
	fi
	ctrd_stop
	pod rm -af >/dev/null 2>&1 || true
	local cg
	cg=$(cgroup2_root)
	rmdir "$cg/$OCI_CG_PARENT/conmon" "$cg/$OCI_CG_PARENT" "$cg/lcrun-oci" 2>/dev/null || true
	rm -rf "$OCI_DIR/podman" 2>/dev/null || true
}

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root"
	# Under TCG every container costs seconds: the VM suite runs only what
	# needs its cgroup v2 controllers; the host suite runs the rest.
	if [ "${LCRUN_IN_VM:-}" = 1 ] && [[ "$BATS_TEST_DESCRIPTION" != *"cgroup v2"* ]]; then
		skip "runs in the host suite (the VM suite runs the cgroup v2 limits)"
	fi
	B="$BATS_TEST_TMPDIR/bundle"
	oci_snapshot
}

teardown() {
	# containers a failed test left behind
	local id
	for id in $(ls "$LCRUN_OCI_ROOT" 2>/dev/null); do
		"$LCRUN_OCI" delete --force "$id" >/dev/null 2>&1 || true
	done
}

need_podman() {
	command -v podman >/dev/null || skip "podman is not installed (contrib/install-deps)"
	pod image exists localhost/lcrun-oci-bb:1 || skip "podman cannot import an image here"
}

need_ctr() {
	[ -S "$OCI_DIR/containerd/sock" ] || skip "containerd is not installed or did not start"
	ctrc image ls -q | grep -q '^localhost/lcrun-oci-bb' || skip "ctr cannot import an image here"
}

cg_path() { # container id in the lcrun-oci state
	jq -r .lcrun.cgroup "$LCRUN_OCI_ROOT/$1/state.json"
}

# ---- the runc verbs -----------------------------------------------------------

@test "run: output, exit status, the bundle's root as it is, pid 1, and nothing left" {
	oci_make_bundle "$B" '["sh", "-c", "echo hello; echo $$; cat /marker; exit 3"]'
	echo "from the bundle" > "$B/rootfs/marker"
	run -3 "$LCRUN_OCI" run --bundle "$B" t-run
	[ "${lines[0]}" = hello ]
	[ "${lines[1]}" = 1 ]
	[ "${lines[2]}" = "from the bundle" ]
	assert_oci_clean
}

@test "create/start split: created waits on the fifo, start runs it, states as the spec says" {
	oci_make_bundle "$B" '["sh", "-c", "echo started > /ran; exec sleep 1037"]'
	"$LCRUN_OCI" create --bundle "$B" --pid-file "$BATS_TEST_TMPDIR/pid" t-split
	run jq -r '.status, .id, .bundle, (.pid|tostring), .ociVersion' < <("$LCRUN_OCI" state t-split)
	[ "${lines[0]}" = created ]
	[ "${lines[1]}" = t-split ]
	[ "${lines[2]}" = "$B" ]
	[ "${lines[3]}" = "$(cat "$BATS_TEST_TMPDIR/pid")" ]
	[ "${lines[4]}" = 1.1.0 ]
	# the program has not run yet
	[ ! -e "$B/rootfs/ran" ]
	run "$LCRUN_OCI" start t-split
	[ "$status" -eq 0 ]
	for _ in $(seq 1 50); do [ -e "$B/rootfs/ran" ] && break; sleep 0.1; done
	[ "$(cat "$B/rootfs/ran")" = started ]
	[ "$("$LCRUN_OCI" state t-split | jq -r .status)" = running ]
	run "$LCRUN_OCI" start t-split
	[ "$status" -eq 1 ]
	[[ "$output" == *"already running"* ]]
	run "$LCRUN_OCI" delete t-split
	[ "$status" -eq 1 ]
	[[ "$output" == *"not stopped: running"* ]]
	run "$LCRUN_OCI" list --format json
	[ "$(echo "$output" | jq -r '.[] | select(.id == "t-split") | .status')" = running ]
	run "$LCRUN_OCI" ps --format json t-split
	[ "$(echo "$output" | jq -r '.[0]')" = "$(cat "$BATS_TEST_TMPDIR/pid")" ]
	"$LCRUN_OCI" pause t-split
	[ "$("$LCRUN_OCI" state t-split | jq -r .status)" = paused ]
	"$LCRUN_OCI" resume t-split
	[ "$("$LCRUN_OCI" state t-split | jq -r .status)" = running ]
	"$LCRUN_OCI" kill t-split KILL
	for _ in $(seq 1 50); do [ "$("$LCRUN_OCI" state t-split | jq -r .status)" = stopped ] && break; sleep 0.1; done
	[ "$("$LCRUN_OCI" state t-split | jq -r '.status, .pid' | tr '\n' ' ')" = "stopped 0 " ]
	run "$LCRUN_OCI" kill t-split
	[ "$status" -eq 1 ]
	[[ "$output" == *"not running"* ]]
	"$LCRUN_OCI" delete t-split
	run "$LCRUN_OCI" state t-split
	[ "$status" -eq 1 ]
	[ "$output" = 'lcrun-oci: container "t-split" does not exist' ]
	assert_oci_clean
}

@test "stage 1 says the pid late (strace holds its clone's return): run works, the hooks get the pid" {
	command -v strace >/dev/null || skip "strace is not installed (contrib/install-deps)"
	# The process runs while its stage 1 is held: its HOOKS and READY
	# reach lcrun-oci before the pid does, as on a busy machine.
	local hook="$BATS_TEST_TMPDIR/hook.sh" log="$BATS_TEST_TMPDIR/pids"
	printf '#!/bin/sh\necho "$1 $(jq -r .pid)" >> %s\n' "$log" > "$hook"
	chmod +x "$hook"
	oci_make_bundle "$B" '["sh", "-c", "echo hello"]'
	oci_config "$B" '.hooks = {prestart: [{path: $h, args: ["hook", "prestart"], env: ["PATH=/usr/bin:/bin"]}],
		poststart: [{path: $h, args: ["hook", "poststart"], env: ["PATH=/usr/bin:/bin"]}]}' --arg h "$hook"
	run strace -o /dev/null -f -e trace=clone -e inject=clone:delay_exit=500000 "$LCRUN_OCI" run --bundle "$B" t-late
	[ "$status" -eq 0 ]
	[[ "$output" == *hello* ]]
	local pre post
	pre=$(awk '$1 == "prestart" { print $2 }' "$log")
	post=$(awk '$1 == "poststart" { print $2 }' "$log")
	[ "$pre" -gt 0 ]
	[ "$pre" = "$post" ]
	# exec: the process fails (no such program) before its helper says its pid
	oci_make_bundle "$BATS_TEST_TMPDIR/b2" '["sleep", "1037"]'
	"$LCRUN_OCI" run -d --bundle "$BATS_TEST_TMPDIR/b2" t-late2
	run -1 strace -o /dev/null -f -e trace=clone -e inject=clone:delay_exit=500000 "$LCRUN_OCI" exec t-late2 no-such-program
	[[ "$output" == *'lcrun-oci: exec: "no-such-program": executable file not found in $PATH'* ]]
	run "$LCRUN_OCI" exec t-late2 echo still-there
	[ "$output" = still-there ]
	"$LCRUN_OCI" delete --force t-late2
	assert_oci_clean
}

@test "kill: signal names and numbers reach the process; --all reaches every process" {
	oci_make_bundle "$B" '["sh", "-c", "trap \"echo got-usr1 >> /log\" USR1; trap \"echo got-term >> /log; exit 0\" TERM; sleep 1037 & touch /ready; while :; do sleep 0.1; done"]'
	"$LCRUN_OCI" run -d --bundle "$B" t-kill
	# pid 1 of its namespace: a signal it has no trap for yet is dropped
	for _ in $(seq 1 100); do [ -e "$B/rootfs/ready" ] && break; sleep 0.1; done
	# (two at once would be one pending signal: wait for the first)
	"$LCRUN_OCI" kill t-kill SIGUSR1
	for _ in $(seq 1 30); do [ "$(grep -c got-usr1 "$B/rootfs/log" 2>/dev/null)" = 1 ] && break; sleep 0.1; done
	"$LCRUN_OCI" kill t-kill 10
	for _ in $(seq 1 30); do [ "$(grep -c got-usr1 "$B/rootfs/log" 2>/dev/null)" = 2 ] && break; sleep 0.1; done
	[ "$(grep -c got-usr1 "$B/rootfs/log")" = 2 ]
	run "$LCRUN_OCI" kill t-kill NOSUCHSIG
	[ "$status" -eq 1 ]
	[[ "$output" == *"unknown signal 'NOSUCHSIG'"* ]]
	[ "$("$LCRUN_OCI" ps --format json t-kill | jq length)" -ge 2 ]
	"$LCRUN_OCI" kill --all t-kill KILL
	for _ in $(seq 1 50); do [ "$("$LCRUN_OCI" state t-kill | jq -r .status)" = stopped ] && break; sleep 0.1; done
	[ "$("$LCRUN_OCI" state t-kill | jq -r .status)" = stopped ]
	# after the end, as the containerd shim sends them: --all succeeds (the
	# cgroup is empty); a signal for the process says runc's "container not
	# running", which the shim takes for "already gone"
	"$LCRUN_OCI" kill --all t-kill KILL
	run -1 "$LCRUN_OCI" kill t-kill KILL
	[[ "$output" == *"container not running"* ]]
	"$LCRUN_OCI" delete t-kill
	assert_oci_clean
}

@test "exec: args and --process, exit status, env and cwd, a missing program, into a stopped one refused" {
	oci_make_bundle "$B" '["sleep", "1037"]'
	"$LCRUN_OCI" run -d --bundle "$B" t-exec
	run -5 "$LCRUN_OCI" exec -e FOO=bar --cwd /tmp t-exec sh -c 'echo $FOO; pwd; exit 5'
	[ "${lines[0]}" = bar ]
	[ "${lines[1]}" = /tmp ]
	jq -n '{args: ["sh", "-c", "id -u; cat /proc/self/status | grep NoNewPrivs"], cwd: "/", user: {uid: 65534, gid: 65534}, noNewPrivileges: true, env: ["PATH=/bin"]}' > "$BATS_TEST_TMPDIR/p.json"
	run "$LCRUN_OCI" exec --process "$BATS_TEST_TMPDIR/p.json" t-exec
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = 65534 ]
	[[ "${lines[1]}" == *"1" ]]
	run "$LCRUN_OCI" exec -d --pid-file "$BATS_TEST_TMPDIR/epid" t-exec sleep 2
	[ "$status" -eq 0 ]
	[ -s "$BATS_TEST_TMPDIR/epid" ]
	# a runtime error, as runc's (engines turn this message into their 127)
	run -1 "$LCRUN_OCI" exec t-exec no-such-program
	[ "$output" = 'lcrun-oci: exec: "no-such-program": executable file not found in $PATH' ]
	"$LCRUN_OCI" kill t-exec KILL
	for _ in $(seq 1 50); do [ "$("$LCRUN_OCI" state t-exec | jq -r .status)" = stopped ] && break; sleep 0.1; done
	run -1 "$LCRUN_OCI" exec t-exec true
	[[ "$output" == *"cannot exec in a stopped container"* ]]
	"$LCRUN_OCI" delete t-exec
	assert_oci_clean
}

@test "run with a terminal: the process gets a pty, its status comes back" {
	command -v script >/dev/null || skip "script(1) is not installed"
	oci_make_bundle "$B" '["sh", "-c", "tty; exit 4"]'
	oci_config "$B" '.process.terminal = true'
	run script -qec "$LCRUN_OCI run --bundle $B t-tty" /dev/null
	[ "$status" -eq 4 ]
	[[ "$output" == *"/dev/pts/0"* ]]
	assert_oci_clean
}

@test "features, spec and the global options" {
	run "$LCRUN_OCI" features
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | jq -r '.ociVersionMax')" = 1.1.0 ]
	[ "$(echo "$output" | jq -r '.linux.cgroup.v2, .linux.cgroup.systemd, .linux.seccomp.enabled' | tr '\n' ' ')" = "true false true " ]
	echo "$output" | jq -e '.hooks | index("createContainer")'
	echo "$output" | jq -e '.linux.capabilities | index("CAP_SYS_ADMIN")'
	# what is refused is said so: no seccomp flags, no idmapped mounts, no LSMs
	[ "$(echo "$output" | jq -c '[.linux.seccomp.supportedFlags, .linux.mountExtensions.idmap.enabled, .linux.apparmor.enabled, .linux.intelRdt.enabled]')" = '[[],false,false,false]' ]
	mkdir -p "$B"
	(cd "$B" && "$LCRUN_OCI" spec)
	jq -e '.process.args == ["sh"] and .root.path == "rootfs"' "$B/config.json"
	run -1 "$LCRUN_OCI" spec --bundle "$B"
	[[ "$output" == *"config.json exists"* ]]
	run -1 "$LCRUN_OCI" --systemd-cgroup list
	[[ "$output" == *"--systemd-cgroup is not supported"* ]]
	[ "${#lines[@]}" -eq 1 ]
	run -1 "$LCRUN_OCI" checkpoint x
	[ "$output" = "lcrun-oci: checkpoint is not supported by lcrun-oci" ]
	# --log --log-format json: errors as JSON lines, as engines read them
	run -1 "$LCRUN_OCI" --log "$BATS_TEST_TMPDIR/log.json" --log-format json state nope
	jq -e 'select(.level == "error") | .msg | contains("does not exist")' "$BATS_TEST_TMPDIR/log.json"
	# --root keeps state where it says
	oci_make_bundle "$BATS_TEST_TMPDIR/b2" '["sleep", "1037"]'
	"$LCRUN_OCI" --root "$BATS_TEST_TMPDIR/root2" run -d --bundle "$BATS_TEST_TMPDIR/b2" t-root
	[ -f "$BATS_TEST_TMPDIR/root2/t-root/state.json" ]
	"$LCRUN_OCI" --root "$BATS_TEST_TMPDIR/root2" delete --force t-root
	[ ! -e "$BATS_TEST_TMPDIR/root2/t-root" ]
	run "$LCRUN_OCI" delete --force never-existed
	[ "$status" -eq 0 ]
	assert_oci_clean
}

# ---- config.json features against what the container sees ----------------------

# One row: a jq filter on the default config, a command, what it must print.
feature_rows() {
	cat <<-'EOF'
		hostname	.hostname = "box7"	hostname	box7
		env	.process.env += ["FOO=bar baz"]	echo "$FOO"	bar baz
		cwd (made when missing)	.process.cwd = "/work/deep"	pwd	/work/deep
		user and additionalGids	.process.user = {uid: 1000, gid: 1001, additionalGids: [5, 7]}	id -u; id -g; id -G	1000 1001 1001 5 7
		umask	.process.user.umask = 63	umask	0077
		capabilities	.process.capabilities = {bounding: ["CAP_KILL", "CAP_CHOWN"], effective: ["CAP_KILL"], permitted: ["CAP_KILL", "CAP_CHOWN"]}	grep -E "^Cap(Eff|Prm|Bnd)" /proc/self/status | awk "{print \$2}"	0000000000000021 0000000000000021 0000000000000021
		ambient capabilities	.process.user.uid = 1000 | .process.capabilities = {bounding: ["CAP_NET_RAW"], effective: ["CAP_NET_RAW"], permitted: ["CAP_NET_RAW"], inheritable: ["CAP_NET_RAW"], ambient: ["CAP_NET_RAW"]}	grep CapAmb /proc/self/status | awk "{print \$2}"	0000000000002000
		noNewPrivileges	.process.noNewPrivileges = true	grep NoNewPrivs /proc/self/status | awk "{print \$2}"	1
		noNewPrivileges false	.process.noNewPrivileges = false	grep NoNewPrivs /proc/self/status | awk "{print \$2}"	0
		rlimits	.process.rlimits = [{type: "RLIMIT_NOFILE", soft: 321, hard: 654}]	ulimit -n; ulimit -Hn	321 654
		oomScoreAdj	.process.oomScoreAdj = 345	cat /proc/self/oom_score_adj	345
		read-only root	.root.readonly = true	touch /x 2>&1 || echo refused	touch: /x: Read-only file system refused
		tmpfs mount with options	.mounts += [{destination: "/scratch", type: "tmpfs", source: "tmpfs", options: ["size=1m", "mode=700", "nosuid"]}]	stat -c %a /scratch; grep " /scratch " /proc/mounts | grep -c "size=1024k"	700 1
		read-only bind	.mounts += [{destination: "/data", type: "bind", source: $host, options: ["rbind", "ro"]}]	cat /data/f; touch /data/g 2>/dev/null || echo refused	host-file refused
		bind of a file	.mounts += [{destination: "/etc/greeting", type: "bind", source: ($host + "/f"), options: ["bind"]}]	cat /etc/greeting	host-file
		maskedPaths	.linux.maskedPaths = ["/proc/timer_list", "/proc/driver"]	wc -c < /proc/timer_list; ls /proc/driver | wc -l	0 0
		readonlyPaths	.linux.readonlyPaths = ["/proc/sys"]	(echo 1 > /proc/sys/kernel/domainname) 2>/dev/null || echo refused	refused
		sysctl (network namespace)	.linux.sysctl = {"net.ipv4.ip_forward": "1", "net.ipv4.ping_group_range": "0 0"}	cat /proc/sys/net/ipv4/ip_forward	1
		devices	.linux.devices = [{path: "/dev/mynull", type: "c", major: 1, minor: 3, fileMode: 432, uid: 0, gid: 0}]	stat -c "%F %t %T %a" /dev/mynull; echo x > /dev/mynull && echo writable	character special file 1 3 660 writable
		device rules (deny all but the default nodes)	.linux.resources.devices = [{allow: false, access: "rwm"}] | .process.capabilities = {bounding: ["CAP_MKNOD"], effective: ["CAP_MKNOD"], permitted: ["CAP_MKNOD"]}	mknod /tmp/kmsg c 1 11 2>&1 | grep -c "not permitted"; mknod /tmp/n c 1 3 && echo null-ok	1 null-ok
		seccomp from the spec	.linux.seccomp = {defaultAction: "SCMP_ACT_ALLOW", syscalls: [{names: ["mkdir", "mkdirat", "no_such_syscall_in_libseccomp"], action: "SCMP_ACT_ERRNO", errnoRet: 1}]}	mkdir /tmp/d 2>&1; grep Seccomp: /proc/self/status | awk "{print \$2}"	mkdir: can't create directory '/tmp/d': Operation not permitted 2
		user namespace and mappings	.linux.namespaces += [{type: "user"}] | .linux.uidMappings = [{containerID: 0, hostID: 200000, size: 65536}] | .linux.gidMappings = [{containerID: 0, hostID: 200000, size: 65536}]	awk "{print \$1, \$2, \$3}" /proc/self/uid_map; id -u	0 200000 65536 0
		cgroup and unified	.linux.cgroupsPath = "/lcrun-oci-test/feat" | .linux.resources.unified = {"cgroup.max.descendants": "3"}	cat /sys/fs/cgroup/cgroup.max.descendants; grep "^0::" /proc/self/cgroup	3 0::/
		annotations stay in the state	.annotations = {"org.example.k": "v"}	echo ok	ok
		domainname	.domainname = "example.org"	cat /proc/sys/kernel/domainname	example.org
		tmpcopyup	.mounts += [{destination: "/etc", type: "tmpfs", source: "tmpfs", options: ["tmpcopyup"]}]	head -1 /etc/passwd; touch /etc/new && echo writable	root:x:0:0:root:/root:/bin/sh writable
	EOF
}

@test "config.json features, table-driven, checked from inside the container" {
	local host="$BATS_TEST_TMPDIR/hostdir"
	mkdir -p "$host"
	echo host-file > "$host/f"
	local failures=0 n=0
	while IFS=$'\t' read -r name filter cmd want; do
		n=$((n + 1))
		local b="$BATS_TEST_TMPDIR/f$n"
		oci_make_bundle "$b" '["true"]'
		oci_config "$b" "$filter" --arg host "$host"
		oci_config "$b" '.process.args = ["sh", "-c", $c]' --arg c "$cmd"
		local got
		got=$("$LCRUN_OCI" run --bundle "$b" "t-feat-$n" 2>&1 | tr '\n' ' ' | sed 's/ *$//')
		if [ "$got" != "$want" ]; then
			echo "FAIL $name: want [$want] got [$got]" >&2
			failures=$((failures + 1))
		fi
	done < <(feature_rows)
	[ "$n" -ge 20 ]
	[ "$failures" -eq 0 ]
	assert_oci_clean
}

@test "namespaces by path: join a network namespace made on the host" {
	local ns=lcrun-oci-t$$
	ip netns add "$ns"
	ip -n "$ns" link add oci-probe0 type veth peer name oci-probe1
	oci_make_bundle "$B" '["sh", "-c", "ls /sys/class/net | sort | tr \"\\n\" \" \""]'
	oci_config "$B" '.linux.namespaces |= map(if .type == "network" then .path = $p else . end)' --arg p "/run/netns/$ns"
	run "$LCRUN_OCI" run --bundle "$B" t-netns
	ip netns del "$ns"
	[ "$status" -eq 0 ]
	[[ "$output" == *"oci-probe0"* ]]
	oci_make_bundle "$B.2" '["true"]'
	oci_config "$B.2" '.linux.namespaces |= map(if .type == "ipc" then .path = "/run/netns/no-such-ns" else . end)'
	run -1 "$LCRUN_OCI" run --bundle "$B.2" t-netns2
	[[ "$output" == *"/run/netns/no-such-ns"* ]]
	assert_oci_clean
}

# Propagation as the container's mountinfo shows it: shared, slave (master:) or private.
PROPAGATION_OF='for m in "$@"; do awk -v m="$m" '"'"'$5 == m { p = "private"; for (i = 7; $i != "-"; i++) { if ($i ~ /^shared:/) p = "shared"; else if ($i ~ /^master:/ && p == "private") p = "slave" } print m, p }'"'"' /proc/self/mountinfo; done'

@test "mount propagation per mount and for the root; filesystem data on a bind is ignored" {
	# the binds' source is a shared mount: each bind is then what its option makes it
	local src="$BATS_TEST_TMPDIR/src"
	mkdir -p "$src"
	mount -t tmpfs lcrun-oci-test "$src"
	mount --make-shared "$src"
	oci_make_bundle "$B" '["true"]'
	oci_config "$B" '.mounts += [
		{destination: "/t-shared", type: "tmpfs", source: "tmpfs", options: ["nosuid", "mode=755", "size=1k", "shared"]},
		{destination: "/t-private", type: "tmpfs", source: "tmpfs", options: ["private"]},
		{destination: "/b-rshared", source: $d, options: ["nosuid", "strictatime", "mode=755", "size=1k", "rbind", "rshared"]},
		{destination: "/b-rslave", source: $d, options: ["rbind", "rslave"]},
		{destination: "/b-private", source: $d, options: ["bind", "private"]},
		{destination: "/b-unbindable", source: $d, options: ["bind", "unbindable"]}]
		| .process.args = ["sh", "-c", $p, "sh", "/t-shared", "/t-private", "/b-rshared", "/b-rslave", "/b-private"]' \
		--arg d "$src" --arg p "$PROPAGATION_OF"
	run "$LCRUN_OCI" run --bundle "$B" t-prop
	umount "$src"
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | tr '\n' ' ')" = "/t-shared shared /t-private private /b-rshared shared /b-rslave slave /b-private private " ]
	# rootfsPropagation shared: pivot_root refuses a shared root, so it is made shared once it is /
	oci_config "$B" '.linux.rootfsPropagation = "shared" | .process.args = ["sh", "-c", $p, "sh", "/"]' --arg p "$PROPAGATION_OF"
	run "$LCRUN_OCI" run --bundle "$B" t-prop2
	[ "$status" -eq 0 ]
	[ "$output" = "/ shared" ]
	assert_oci_clean
}

@test "namespaces left out are the runtime's: no mount namespace, a uts namespace by path takes the hostname" {
	# no mount namespace: the container's mounts stand in the host's table under its root, and go with delete
	oci_make_bundle "$B" '["sleep", "1037"]'
	echo "from the bundle" > "$B/rootfs/marker"
	oci_config "$B" '.linux.namespaces = [] | del(.hostname) | del(.linux.maskedPaths) | del(.linux.readonlyPaths)'
	"$LCRUN_OCI" create --bundle "$B" t-hostns
	local pid
	pid=$("$LCRUN_OCI" state t-hostns | jq .pid)
	local t
	for t in mnt net pid ipc uts cgroup user; do
		[ "$(readlink "/proc/$pid/ns/$t")" = "$(readlink "/proc/self/ns/$t")" ] || { echo "$t differs" >&2; false; }
	done
	grep -q " $B/rootfs/proc " /proc/self/mountinfo
	"$LCRUN_OCI" start t-hostns
	run "$LCRUN_OCI" exec t-hostns cat /marker
	[ "$output" = "from the bundle" ]
	"$LCRUN_OCI" kill t-hostns KILL
	"$LCRUN_OCI" delete --force t-hostns
	! grep -q " $B/rootfs" /proc/self/mountinfo
	# a uts namespace joined by path gets the config's hostname
	unshare --uts --fork --kill-child sleep 1037 >/dev/null 2>&1 3>&- &
	local holder=$!
	local upid=""
	for _ in $(seq 1 50); do
		upid=$(pgrep -P "$holder" -x sleep) && break
		sleep 0.1
	done
	oci_make_bundle "$B.2" '["true"]'
	oci_config "$B.2" '.hostname = "by-path" | .linux.namespaces |= map(if .type == "uts" then .path = $p else . end)' \
		--arg p "/proc/$upid/ns/uts"
	run "$LCRUN_OCI" run --bundle "$B.2" t-utspath
	local name
	name=$(nsenter --uts="/proc/$upid/ns/uts" hostname)
	kill "$upid" # (unshare --fork ignores TERM while it waits)
	wait "$holder" || true
	[ "$status" -eq 0 ]
	[ "$name" = by-path ]
	assert_oci_clean
}

@test "config.json changed after create does not change the container" {
	oci_make_bundle "$B" '["sh", "-c", "echo $FOO; hostname"]'
	oci_config "$B" '.hostname = "first" | .process.env += ["FOO=created"] | .linux.rootfsPropagation = "shared"'
	"$LCRUN_OCI" create --bundle "$B" t-cfg > "$BATS_TEST_TMPDIR/out" 2>&1
	echo '{"ociVersion": "1.0.0"}' > "$B/config.json"
	"$LCRUN_OCI" start t-cfg
	for _ in $(seq 1 50); do
		[ "$("$LCRUN_OCI" state t-cfg | jq -r .status)" = stopped ] && break
		sleep 0.1
	done
	"$LCRUN_OCI" delete t-cfg
	[ "$(tr '\n' ' ' < "$BATS_TEST_TMPDIR/out")" = "created first " ]
	assert_oci_clean
}

@test "hooks: every kind runs, in order, with the state on stdin" {
	local log="$BATS_TEST_TMPDIR/hooks.log"
	local hook="$BATS_TEST_TMPDIR/hook.sh"
	printf '#!/bin/sh\nstate=$(cat)\necho "$1 $(echo "$state" | jq -r "[.id, .status, (.pid > 0), .annotations.k] | join(\\" \\")")" >> %s\n' "$log" > "$hook"
	chmod +x "$hook"
	oci_make_bundle "$B" '["sh", "-c", "exit 0"]'
	oci_config "$B" '.annotations = {k: "v"} | .hooks = {
		prestart: [{path: $h, args: ["hook", "prestart"], env: ["PATH=/usr/bin:/bin"]}],
		createRuntime: [{path: $h, args: ["hook", "createRuntime"], env: ["PATH=/usr/bin:/bin"]}],
		createContainer: [{path: $h, args: ["hook", "createContainer"], env: ["PATH=/usr/bin:/bin"]}],
		startContainer: [{path: $h, args: ["hook", "startContainer"], env: ["PATH=/usr/bin:/bin"]}],
		poststart: [{path: $h, args: ["hook", "poststart"], env: ["PATH=/usr/bin:/bin"]}],
		poststop: [{path: $h, args: ["hook", "poststop"], env: ["PATH=/usr/bin:/bin"]}]}' --arg h "$hook"
	# createContainer and startContainer run in the container: give them the host's tools
	oci_config "$B" '.mounts += [{destination: $d, type: "bind", source: $d, options: ["rbind"]}, {destination: "/usr", type: "bind", source: "/usr", options: ["rbind", "ro"]}, {destination: "/lib", type: "bind", source: "/lib", options: ["rbind", "ro"]}, {destination: "/lib64", type: "bind", source: "/lib64", options: ["rbind", "ro"]}] | .process.env += ["PATH=/usr/bin:/bin"]' --arg d "$BATS_TEST_TMPDIR"
	"$LCRUN_OCI" run --bundle "$B" t-hooks
	run cat "$log"
	[ "${lines[0]}" = "prestart t-hooks creating true v" ]
	[ "${lines[1]}" = "createRuntime t-hooks creating true v" ]
	[ "${lines[2]}" = "createContainer t-hooks created true v" ]
	[ "${lines[3]}" = "startContainer t-hooks running true v" ]
	[ "${lines[4]}" = "poststart t-hooks running true v" ]
	[ "${lines[5]}" = "poststop t-hooks stopped false v" ]
	# a failing createRuntime hook fails create and leaves nothing
	oci_config "$B" '.hooks = {createRuntime: [{path: "/bin/false"}]}'
	run -1 "$LCRUN_OCI" create --bundle "$B" t-hooks2
	[[ "$output" == *"hooks.createRuntime: /bin/false exited 1"* ]]
	assert_oci_clean
}

@test "linux.resources: memory, swap, pids, cpu and cpuset written into the container's cgroup v2" {
	local c
	for c in memory pids cpu; do
		have_controller "$c" || skip "the cgroup v2 '$c' controller is not on this host (the VM suite runs this)"
	done
	oci_make_bundle "$B" '["sh", "-c", "cd /sys/fs/cgroup && cat memory.max memory.swap.max memory.low pids.max cpu.max cpu.weight"]'
	oci_config "$B" '.linux.resources += {memory: {limit: 67108864, swap: 100663296, reservation: 1048576},
		pids: {limit: 32}, cpu: {quota: 50000, period: 100000, shares: 2048}}'
	run "$LCRUN_OCI" run --bundle "$B" t-res
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | tr '\n' ' ')" = "67108864 33554432 1048576 32 50000 100000 79 " ]
	# a memory hog is killed by the kernel's OOM killer: status 137
	oci_make_bundle "$B.2" '["sh", "-c", "x=$(head -c 200000000 /dev/zero | tr \"\\0\" a); echo survived"]'
	oci_config "$B.2" '.linux.resources += {memory: {limit: 33554432, swap: 33554432}}'
	run "$LCRUN_OCI" run --bundle "$B.2" t-res2
	[ "$status" -eq 137 ]
	[[ "$output" != *survived* ]]
	assert_oci_clean
}

# ---- bad bundles ------------------------------------------------------------------

@test "bad bundles: one line that names the problem, exit 1, nothing left" {
	oci_make_bundle "$B" '["true"]'
	cp "$B/config.json" "$BATS_TEST_TMPDIR/good.json"
	check() { # FILTER EXPECTED-SUBSTRING
		jq "$1" "$BATS_TEST_TMPDIR/good.json" > "$B/config.json"
		run "$LCRUN_OCI" create --bundle "$B" t-bad
		[ "$status" -eq 1 ] || { echo "status $status for $1" >&2; return 1; }
		[ "${#lines[@]}" -eq 1 ] || { echo "not one line for $1: $output" >&2; return 1; }
		[[ "$output" == "lcrun-oci: "*"$2"* ]] || { echo "for $1: $output" >&2; return 1; }
	}
	check '.root.path = "nowhere"' "root.path $B/nowhere: No such file or directory"
	check '.linux.namespaces += [{type: "bogus"}]' "linux.namespaces[6].type: unknown namespace type 'bogus'"
	check '.linux.intelRdt = {closID: "x"}' "linux.intelRdt is not supported by lcrun-oci"
	check '.process.apparmorProfile = "docker-default"' "process.apparmorProfile is not supported by lcrun-oci"
	check '.process.selinuxLabel = "x"' "process.selinuxLabel is not supported by lcrun-oci"
	check '.linux.seccomp = {defaultAction: "SCMP_ACT_ALLOW", listenerPath: "/run/x.sock"}' "linux.seccomp.listenerPath is not supported"
	check '.linux.seccomp = {defaultAction: "SCMP_ACT_ALLOW", flags: ["SECCOMP_FILTER_FLAG_LOG"]}' "linux.seccomp.flags: SECCOMP_FILTER_FLAG_LOG is not supported"
	check '.linux.resources.hugepageLimits = [{pageSize: "2MB", limit: 1}]' "linux.resources.hugepageLimits is not supported"
	check '.linux.sysctl = {"kernel.panic": "1"}' "linux.sysctl.kernel.panic: not a namespaced sysctl"
	check '.linux.namespaces |= map(select(.type != "mount"))' "linux.maskedPaths/readonlyPaths: need a mount namespace"
	check '.linux.namespaces |= map(select(.type != "uts"))' "hostname: setting it needs a uts namespace"
	check '.mounts += [{destination: "/x", type: "tmpfs", options: ["ridmap"]}]' "mounts[7].options: 'ridmap' is not supported"
	check '.process.args = ["no-such-program"]' 'exec: "no-such-program": executable file not found in $PATH'
	check '.process.args = []' "process.args: missing or empty"
	check '.linux.cgroupsPath = "system.slice:lcrun:x"' "systemd slice:prefix:name path"
	check '.ociVersion = "2.0.0"' "ociVersion: 2.0.0 is not a 1.x runtime-spec version"
	check '.process.capabilities.bounding = ["CAP_NOPE"]' "process.capabilities.bounding[0]: unknown capability CAP_NOPE"
	check '.linux.seccomp = {defaultAction: "SCMP_ACT_NOTIFY"}' 'SCMP_ACT_NOTIFY is not supported'
	printf '{"ociVersion": "1.1.0",\n  "root": }\n' > "$B/config.json"
	run -1 "$LCRUN_OCI" create --bundle "$B" t-bad
	[[ "$output" == "lcrun-oci: $B/config.json:2:"*"invalid JSON"* ]]
	run -1 "$LCRUN_OCI" create --bundle "$BATS_TEST_TMPDIR/no-bundle" t-bad
	[[ "$output" == *"no-bundle"* ]]
	if ! have_controller memory; then
		check '.linux.resources.memory = {limit: 67108864}' "linux.resources.memory needs the cgroup v2 'memory' controller"
		check '.linux.resources.pids = {limit: 10}' "linux.resources.pids.limit needs the cgroup v2 'pids' controller"
	fi
	assert_oci_clean
}

# ---- Podman ---------------------------------------------------------------------------

@test "podman --runtime lcrun-oci: run --rm, exit codes, the image's root" {
	need_podman
	run pod_run localhost/lcrun-oci-bb:1 sh -c 'echo hi from podman; cat /proc/1/cmdline | tr "\0" " "'
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "hi from podman" ]
	[[ "${lines[1]}" == "sh -c "* ]]
	run -42 pod_run localhost/lcrun-oci-bb:1 sh -c 'exit 42'
	run -127 pod_run localhost/lcrun-oci-bb:1 no-such-program
	[[ "$output" == *"executable file not found"* ]]
	# (pid 1 cannot be killed from inside: a child is)
	run -137 pod_run localhost/lcrun-oci-bb:1 sh -c 'sh -c "kill -9 \$\$"; exit $?'
	# --read-only: a read-only root with tmpfs /tmp, /var/tmp, /run (tmpcopyup)
	run pod_run --read-only localhost/lcrun-oci-bb:1 sh -c 'touch /x 2>/dev/null || echo ro; touch /tmp/y && echo tmp-ok'
	[ "$output" = "$(printf 'ro\ntmp-ok')" ]
	[ "$(pod ps -aq | wc -l)" = 0 ]
	assert_oci_clean
}

@test "podman: -it gets a terminal; --network none has loopback only" {
	need_podman
	command -v script >/dev/null || skip "script(1) is not installed"
	# script's stdin must stay open (and empty) while the container runs:
	# at EOF (CI runs with stdin on /dev/null) script hands the terminal an
	# end of input and podman's -it output was lost in 2 runs out of 3.
	mkfifo "$BATS_TEST_TMPDIR/stdin"
	exec {keep}<>"$BATS_TEST_TMPDIR/stdin"
	run script -qec "CONTAINERS_CONF=$OCI_DIR/containers.conf podman --root $OCI_DIR/podman/root --runroot $OCI_DIR/podman/run --storage-driver vfs --tmpdir $OCI_DIR/podman/tmp run --rm -it --network none --cgroup-parent /$OCI_CG_PARENT localhost/lcrun-oci-bb:1 sh -c 'tty; exit 3'" /dev/null <&$keep
	exec {keep}>&-
	[ "$status" -eq 3 ]
	[[ "$output" == *"/dev/pts/0"* ]]
	run pod_run localhost/lcrun-oci-bb:1 sh -c 'ls /sys/class/net; cat /sys/class/net/lo/operstate'
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = lo ]
	[ "${#lines[@]}" -eq 2 ]
	assert_oci_clean
}

@test "podman: exec, stop (SIGTERM, then SIGKILL), kill, rm" {
	need_podman
	local id
	id=$(pod run -d --network none --cgroup-parent "/$OCI_CG_PARENT" localhost/lcrun-oci-bb:1 \
		sh -c 'trap "echo bye; exit 0" TERM; sleep 1037 & wait')
	run -6 pod exec "$id" sh -c 'echo in exec; exit 6'
	[ "$output" = "in exec" ]
	run -127 pod exec "$id" no-such-program
	run pod exec "$id" pidof sleep
	[ "$status" -eq 0 ]
	[ -n "$output" ]
	pod stop -t 5 "$id"
	[ "$(pod inspect --format '{{.State.ExitCode}}' "$id")" = 0 ]
	run pod logs "$id"
	[ "$output" = bye ]
	pod rm "$id"
	id=$(pod run -d --network none --cgroup-parent "/$OCI_CG_PARENT" localhost/lcrun-oci-bb:1 sleep 1037)
	pod kill -s KILL "$id"
	pod wait "$id"
	[ "$(pod inspect --format '{{.State.ExitCode}}' "$id")" = 137 ]
	pod rm "$id"
	assert_oci_clean
}

@test "podman: --memory and --pids-limit (cgroup v2 controllers; refused by name where missing)" {
	need_podman
	if ! have_controller memory || ! have_controller pids; then
		run pod_run --memory 64m localhost/lcrun-oci-bb:1 true
		[ "$status" -ne 0 ]
		[[ "$output" == *"linux.resources.memory needs the cgroup v2 'memory' controller"* ]]
		run pod_run --pids-limit 32 localhost/lcrun-oci-bb:1 true
		[ "$status" -ne 0 ]
		[[ "$output" == *"linux.resources.pids.limit needs the cgroup v2 'pids' controller"* ]]
		assert_oci_clean
		skip "no memory/pids controllers in cgroup v2 here (hybrid host): the VM suite runs the limits"
	fi
	# One container (each costs seconds under the VM's TCG): the knobs, a
	# fork bomb held at pids.max, then a memory hog the OOM killer ends.
	run pod_run --memory 32m --memory-swap 32m --pids-limit 16 localhost/lcrun-oci-bb:1 sh -c '
		cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory.swap.max /sys/fs/cgroup/pids.max
		for i in $(seq 1 40); do sleep 1 & done 2>&1 | grep -c fork
		sleep 2
		x=$(head -c 200000000 /dev/zero | tr "\0" a); echo survived'
	[ "$status" -eq 137 ]
	[ "${lines[0]}" = 33554432 ]
	[ "${lines[1]}" = 0 ]
	[ "${lines[2]}" = 16 ]
	[ "${lines[3]}" -ge 1 ]
	[[ "$output" != *survived* ]]
	assert_oci_clean
}

# ---- containerd -----------------------------------------------------------------------

@test "ctr run --runc-binary lcrun-oci: output, exit codes, terminal" {
	need_ctr
	run ctrc run --rm --runc-binary "$LCRUN_OCI" localhost/lcrun-oci-bb:bb t-ctr1 sh -c 'echo hi from ctr; cat /proc/self/cgroup; exit 7'
	[ "$status" -eq 7 ]
	[ "${lines[0]}" = "hi from ctr" ]
	[[ "$output" == *"0::/$CTR_NS/t-ctr1"* ]]
	if command -v script >/dev/null; then
		run script -qec "ctr --address $OCI_DIR/containerd/sock -n $CTR_NS run --rm -t --runc-binary $LCRUN_OCI localhost/lcrun-oci-bb:bb t-ctr2 sh -c 'tty; exit 5'" /dev/null
		[ "$status" -eq 5 ]
		[[ "$output" == *"/dev/pts/0"* ]]
	fi
	[ -z "$(ctrc task ls -q)" ]
	assert_oci_clean
}

@test "ctr: task exec, ps, pause/resume, kill" {
	need_ctr
	ctrc run -d --runc-binary "$LCRUN_OCI" localhost/lcrun-oci-bb:bb t-ctr3 sleep 1037
	run -9 ctrc task exec --exec-id e1 t-ctr3 sh -c 'echo exec ok; exit 9'
	[ "$output" = "exec ok" ]
	[ "$(ctrc task ps t-ctr3 | tail -n +2 | wc -l)" -ge 1 ]
	ctrc task pause t-ctr3
	[ "$(ctrc task ls | awk '$1 == "t-ctr3" { print $3 }')" = PAUSED ]
	ctrc task resume t-ctr3
	[ "$(ctrc task ls | awk '$1 == "t-ctr3" { print $3 }')" = RUNNING ]
	ctrc task kill -s SIGKILL t-ctr3
	for _ in $(seq 1 50); do [ "$(ctrc task ls | awk '$1 == "t-ctr3" { print $3 }')" = STOPPED ] && break; sleep 0.1; done
	ctrc task rm t-ctr3
	ctrc container rm t-ctr3
	assert_oci_clean
}
