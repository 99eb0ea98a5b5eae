#!/usr/bin/env bats
# Seccomp as a user sees it: what the default profile refuses inside a
# sandbox, --seccomp FILE|unconfined, and one-line errors for bad profiles.
# Runs as root with $LCRUN pointing to the built lcrun.

PY=/usr/bin/python3

setup() {
	: "${LCRUN:?LCRUN must point to the built lcrun binary}"
	TMP=$(mktemp -d /tmp/lcrun-bats-seccomp.XXXXXX)
}

teardown() {
	rm -rf "$TMP"
}

need_x86_64() {
	[ "$(uname -m)" = x86_64 ] || skip "syscall numbers in this test are x86_64's (host is $(uname -m))"
}

# run_bad_profile FILE STATUS TEXT...: `lcrun run --seccomp FILE` must fail
# with STATUS and print one line "lcrun: ..." holding each TEXT in order.
# A bad profile is found once the sandbox's state directory and cgroup
# are made (a run's program is made after the staging fork): nothing of
# the sandbox may be left.
cgroups() {
	find /sys/fs/cgroup/unified/lcrun /sys/fs/cgroup/lcrun -mindepth 1 -maxdepth 1 -type d 2>/dev/null | sort
}

run_bad_profile() {
	local cg_before
	cg_before=$(cgroups)
	LCRUN_ROOT="$TMP/root" LCRUN_STATE_DIR="$TMP/state" run "$LCRUN" run --seccomp "$1" -- true
	echo "$output"
	[ "$status" -eq "$2" ]
	[ "${#lines[@]}" -eq 1 ]
	[ -z "$(ls "$TMP/root/sandboxes" 2>/dev/null)" ] # (.state-dir is the root's own)
	[ -z "$(find "$TMP/state" -mindepth 1 -maxdepth 1 -regextype egrep -regex '.*/[0-9a-f]{12}' 2>/dev/null)" ]
	[ "$(cgroups)" = "$cg_before" ]
	local rest="$output" t
	[[ "$rest" == "lcrun: "* ]]
	for t in "${@:3}"; do
		[[ "$rest" == *"$t"* ]]
		rest=${rest#*"$t"}
	done
}

need_tool() {
	command -v "$1" >/dev/null || skip "$1 is not installed on the host"
}

# Print "NAME ERRNO" (or "NAME ok") for raw syscalls made from Python, so the
# result names the errno the filter returned.  x86_64 numbers.
probe_script() {
	cat <<'EOF'
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
calls = {
    "keyctl": (250, 0, -1, 1),            # KEYCTL_GET_KEYRING_ID, thread keyring, create
    "add_key": (248, b"user", b"k", b"v", 1, -2),
    "bpf": (321, 0, 0, 0),
    "userfaultfd": (323, 0),
    "io_uring_setup": (425, 1, ctypes.create_string_buffer(120)),
    "unshare_newuser": (272, 0x10000000),
    "setns": (308, 0, 0),
    "mount": (165, b"x", b"/mnt", b"tmpfs", 0, 0),
    "finit_module": (313, 0, b"", 0),
    "kexec_load": (246, 0, 0, 0, 0),
    "perf_event_open": (298, 0, 0, -1, -1, 0),
    "clone3": (435, 0, 0),
    "nosuch_1000": (1000,),
}
for name in sys.argv[1:]:
    args = calls[name]
    r = libc.syscall(*[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    e = ctypes.get_errno()
    print(name, "ok" if r >= 0 else errno.errorcode[e])
EOF
}

@test "default profile: the seccomp filter is installed (Seccomp: 2)" {
	run "$LCRUN" run -- grep '^Seccomp:' /proc/self/status
	[ "$status" -eq 0 ]
	[[ "$output" =~ ^Seccomp:[[:space:]]+2$ ]]
}

@test "default profile: an x32 system call ends the process (the profile covers x86_64 and x86 only)" {
	need_x86_64
	# getpid with the x32 bit: the filter's architecture check sends it to
	# the bad-architecture action, whether or not the kernel has x32.
	cat >"$TMP/x32.py" <<'EOF'
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall(ctypes.c_long(0x40000000 | 39))
print("still here")
EOF
	run "$LCRUN" run --bind "$TMP/x32.py:/x32.py" -- "$PY" /x32.py
	echo "$output"
	[ "$status" -eq 159 ] # 128 + SIGSYS
	[[ "$output" != *"still here"* ]]
	# the x86_64 call without the bit is answered
	run "$LCRUN" run -- "$PY" -c 'import os; print(os.getpid())'
	[ "$status" -eq 0 ]
	[ "$output" = 2 ]
}

@test "default profile: unshare -U is refused" {
	need_tool unshare
	run "$LCRUN" run -- unshare -U true
	[ "$status" -ne 0 ]
	[[ "$output" == *"Operation not permitted"* ]]
}

@test "default profile: mount -t tmpfs is refused" {
	run "$LCRUN" run -- sh -c 'mkdir -p /mnt; mount -t tmpfs x /mnt'
	[ "$status" -ne 0 ]
	# mount(8) prints EPERM as "permission denied"
	[[ "${output,,}" == *"permission denied"* || "$output" == *"Operation not permitted"* ]]
}

@test "default profile: insmod is refused" {
	need_tool insmod
	mod=$(find /lib/modules -name '*.ko*' -print -quit 2>/dev/null)
	[ -n "$mod" ] || skip "no kernel module file under /lib/modules to try"
	run "$LCRUN" run -- insmod "$mod"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Operation not permitted"* ]]
}

@test "default profile: refused syscalls get EPERM, unknown ones and clone3 ENOSYS" {
	need_x86_64
	[ -x "$PY" ] || skip "$PY is not installed on the host"
	run "$LCRUN" run -- "$PY" -c "$(probe_script)" \
		keyctl add_key bpf userfaultfd io_uring_setup unshare_newuser setns mount \
		finit_module kexec_load perf_event_open clone3 nosuch_1000
	echo "$output"
	[ "$status" -eq 0 ]
	for s in keyctl add_key bpf userfaultfd io_uring_setup unshare_newuser setns mount \
		finit_module kexec_load perf_event_open; do
		grep -qx "$s EPERM" <<<"$output"
	done
	grep -qx "clone3 ENOSYS" <<<"$output"
	grep -qx "nosuch_1000 ENOSYS" <<<"$output"
}

@test "default profile: fork, threads and ordinary programs still work" {
	run "$LCRUN" run -- sh -c 'echo a | sort | tr a b; (exit 3); echo $?'
	[ "$status" -eq 0 ]
	[ "$output" = "$(printf 'b\n3')" ]
	if [ -x "$PY" ]; then
		run "$LCRUN" run -- "$PY" -c 'import threading; t = threading.Thread(target=print, args=("thread",)); t.start(); t.join()'
		[ "$status" -eq 0 ]
		[ "$output" = thread ]
	fi
}

@test "--seccomp unconfined: no filter, keyctl works" {
	run "$LCRUN" run --seccomp unconfined -- grep '^Seccomp:' /proc/self/status
	[ "$status" -eq 0 ]
	[[ "$output" =~ ^Seccomp:[[:space:]]+0$ ]]
	need_x86_64
	[ -x "$PY" ] || skip "$PY is not installed on the host"
	run "$LCRUN" run --seccomp unconfined -- "$PY" -c "$(probe_script)" keyctl
	[ "$status" -eq 0 ]
	[ "$output" = "keyctl ok" ]
}

@test "--seccomp FILE: a custom profile is used" {
	# Allow everything but uname, which gets EACCES.
	cat > "$TMP/p.json" <<'EOF'
{
  "defaultAction": "SCMP_ACT_ALLOW",
  "syscalls": [ { "names": ["uname"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13 } ]
}
EOF
	run "$LCRUN" run --seccomp "$TMP/p.json" -- uname -r
	[ "$status" -ne 0 ]
	[[ "$output" == *"Permission denied"* ]]
	run "$LCRUN" run --seccomp "$TMP/p.json" -- grep '^Seccomp:' /proc/self/status
	[ "$status" -eq 0 ]
	[[ "$output" =~ Seccomp:[[:space:]]+2 ]]
}

@test "--seccomp: invalid JSON is one line with file:line:column, exit 121" {
	printf '{\n  "defaultAction": "SCMP_ACT_ERRNO",\n  "syscalls": [\n    { "names": ["read"] "action": "SCMP_ACT_ALLOW" }\n  ]\n}\n' > "$TMP/bad.json"
	run_bad_profile "$TMP/bad.json" 121 "$TMP/bad.json:4:" "invalid JSON"
}

@test "--seccomp: an unknown syscall is named with its position, exit 121" {
	printf '{\n  "defaultAction": "SCMP_ACT_ERRNO",\n  "syscalls": [\n    { "names": ["read",\n               "frobnicate_at"], "action": "SCMP_ACT_ALLOW" }\n  ]\n}\n' > "$TMP/unk.json"
	run_bad_profile "$TMP/unk.json" 121 "$TMP/unk.json:5:16: syscalls[0].names[1]: unknown syscall \"frobnicate_at\""
}

@test "--seccomp: a wrong field type names the JSON path, exit 121" {
	echo '{ "defaultAction": "SCMP_ACT_ERRNO", "syscalls": [ { "names": ["read"], "action": ["SCMP_ACT_ALLOW"] } ] }' > "$TMP/type.json"
	run_bad_profile "$TMP/type.json" 121 "$TMP/type.json: syscalls[0].action: expected a string, got an array"
}

@test "--seccomp: a missing file exits 122" {
	run_bad_profile "$TMP/nope.json" 122 "$TMP/nope.json"
}

@test "the compiled filter is cached under the lib dir, 0600 in a 0700 dir" {
	export LCRUN_ROOT="$TMP/root"
	run "$LCRUN" run -- true
	[ "$status" -eq 0 ]
	files=("$LCRUN_ROOT"/seccomp/*.bpf)
	[ "${#files[@]}" -eq 1 ]
	[ -f "${files[0]}" ]
	[ "$(stat -c %a "${files[0]}")" = 600 ]
	[ "$(stat -c %a "$LCRUN_ROOT/seccomp")" = 700 ]
	# A damaged cache file is recompiled and rewritten, and still confines.
	before=$(stat -c %s "${files[0]}")
	truncate -s 10 "${files[0]}"
	run "$LCRUN" run -- grep '^Seccomp:' /proc/self/status
	[ "$status" -eq 0 ]
	[[ "$output" =~ Seccomp:[[:space:]]+2 ]]
	[ "$(stat -c %s "${files[0]}")" -eq "$before" ]
}

@test "lcrun seccomp check: the shipped profile compiles, a bad one is refused" {
	run "$LCRUN" seccomp check "$BATS_TEST_DIRNAME/../../policies/default.json"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" =~ default\.json:\ ok,\ [0-9]+\ BPF\ instructions$ ]]
	printf '{ "defaultAction": "SCMP_ACT_ERRNO",\n  "syscalls": [ { "names": ["mount_everything"], "action": "SCMP_ACT_ALLOW" } ] }\n' > "$TMP/unk.json"
	run "$LCRUN" seccomp check "$TMP/unk.json"
	echo "$output"
	[ "$status" -eq 121 ]
	[[ "$output" == "lcrun: $TMP/unk.json:2:29: syscalls[0].names[0]: unknown syscall \"mount_everything\""* ]]
}
