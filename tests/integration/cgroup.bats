#!/usr/bin/env bats
# cgroup v2 limits and accounting.  The limit tests need the memory, pids and
# cpu controllers in the v2 hierarchy: on a hybrid v1/v2 host they are
# skipped here and run in the VM suite (tests/vm), on a pure v2 kernel.  The
# hybrid tests check the errors such a host must give.
#
# check-vm: yes

load helpers

setup() {
	host_snapshot
}

teardown() {
	assert_host_clean
}

need() {
	for c in "$@"; do
		have_controller "$c" || skip "the cgroup v2 '$c' controller is not on this host (the VM suite runs this)"
	done
}

@test "each sandbox gets its own cgroup under lcrun/, its cgroup namespace rooted there" {
	run "$LCRUN" run -- sh -c 'grep "^0::" /proc/self/cgroup; ls /sys/fs/cgroup/cgroup.procs'
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "0::/" ]
	run "$LCRUN" run --keep -- sh -c 'true'
	id=$(echo "$output" | sed -n 's/^lcrun: kept sandbox //p')
	# the cgroup itself is gone once the sandbox ended
	[ ! -d "$(cgroup2_root)/lcrun/$id" ]
	rm -rf "$LCRUN_LIB/sandboxes/$id" "$LCRUN_RUN/$id"
}

@test "a sandbox cannot raise its limits or leave its cgroup" {
	run "$LCRUN" run -- sh -c 'echo max > /sys/fs/cgroup/pids.max && echo raised; echo $$ > /sys/fs/cgroup/../cgroup.procs && echo escaped; cat /proc/self/cgroup'
	[[ "$output" != *raised* ]]
	[[ "$output" != *escaped* ]]
	[[ "$output" == *"0::/"* ]]
	# even with mount allowed and CAP_SYS_ADMIN, a fresh cgroup2 mount shows
	# only the sandbox's own subtree, whose files belong to the host's root
	run "$LCRUN" run --seccomp unconfined --cap-add SYS_ADMIN -- sh -c '
		mkdir -p /tmp/cg && mount -t cgroup2 none /tmp/cg && echo mounted
		ls /tmp/cg | grep -c "^lcrun$" || true
		echo max > /tmp/cg/pids.max 2>/dev/null && echo raised
		echo 1 > /tmp/cg/cgroup.kill 2>/dev/null && echo killed-self'
	[[ "$output" != *raised* ]]
	[[ "$output" != *killed-self* ]]
}

@test "defaults: pids.max 4096 and no memory cap; --limits agent" {
	need pids memory cpu
	run "$LCRUN" run -- sh -c 'cat /sys/fs/cgroup/pids.max /sys/fs/cgroup/memory.max'
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = 4096 ]
	[ "${lines[1]}" = max ]
	run "$LCRUN" run --limits agent -- sh -c 'cat /sys/fs/cgroup/pids.max /sys/fs/cgroup/memory.max /sys/fs/cgroup/cpu.max /sys/fs/cgroup/memory.swap.max'
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = 1024 ]
	[ "${lines[1]}" = 4294967296 ]
	[ "${lines[2]}" = "200000 100000" ]
	[ "${lines[3]}" = 0 ]
}

@test "a memory hog under --memory 64M is OOM-killed and reported" {
	need memory
	run "$LCRUN" run --memory 64M --result "$BATS_TEST_TMPDIR/r.json" -- python3 -c 'b = bytearray(512 << 20); print("allocated")'
	[ "$status" -eq 137 ]
	[[ "$output" != *allocated* ]]
	[[ "$output" == *"lcrun: killed by the out-of-memory killer (memory limit 64 MiB)"* ]]
	[ "$(jq -r .oom_killed "$BATS_TEST_TMPDIR/r.json")" = true ]
	peak=$(jq -r .memory_peak_bytes "$BATS_TEST_TMPDIR/r.json")
	[ "$peak" -le $((64 << 20)) ]
	[ "$peak" -gt $((32 << 20)) ]
}

@test "a fork bomb under --pids 64 stops at 64 and the sandbox tears down" {
	need pids
	run "$LCRUN" run --pids 64 --timeout 60 --result "$BATS_TEST_TMPDIR/r.json" -- python3 -c '
import os, time
n = 0
for i in range(200):
    try:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
    except OSError:
        pass
print(n)'
	echo "$output"
	[ "$status" -eq 0 ]
	# init and python count too: 62 children make 64 tasks
	[ "${lines[-1]}" -eq 62 ]
	[ "$(jq -r .pids_peak "$BATS_TEST_TMPDIR/r.json")" = 64 ]
	if pgrep -f "sleep 30"; then false; fi
}

@test "a busy loop under --cpus 0.5 gets about half a CPU" {
	need cpu
	# cpu.stat before and after 2 s of wall time with a busy child: a ratio
	run "$LCRUN" run --cpus 0.5 -- python3 -c '
import os, signal, time
def usage():
    with open("/sys/fs/cgroup/cpu.stat") as f:
        return int(f.readline().split()[1])
pid = os.fork()
if pid == 0:
    while True:
        pass
u0, t0 = usage(), time.monotonic()
time.sleep(2)
u1, t1 = usage(), time.monotonic()
os.kill(pid, signal.SIGKILL)
print("%.3f" % ((u1 - u0) / 1e6 / (t1 - t0)))'
	[ "$status" -eq 0 ]
	echo "share of a CPU: ${lines[-1]}"
	awk -v r="${lines[-1]}" 'BEGIN { exit !(r >= 0.45 && r <= 0.55) }'
}

@test "cgroup kill takes down a process tree that ignores SIGTERM" {
	run "$LCRUN" run --timeout 2 -- sh -c 'trap "" TERM; (trap "" TERM; exec sleep 5711) & sh -c "trap \"\" TERM; exec sleep 5712" & wait'
	[ "$status" -eq 124 ]
	if pgrep -f "sleep 571[12]"; then false; fi
}

@test "accounting: --result carries cpu usage where the host has it" {
	run "$LCRUN" run --result "$BATS_TEST_TMPDIR/r.json" -- sh -c 'i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done'
	[ "$status" -eq 0 ]
	[ "$(jq -r '.cpu_user_us + .cpu_system_us > 0' "$BATS_TEST_TMPDIR/r.json")" = true ]
}

@test "hybrid host: a requested limit fails naming the controller and the mode; best-effort runs" {
	have_controller memory && skip "this host's cgroup v2 has the memory controller"
	run "$LCRUN" run --memory 64M -- true
	[ "$status" -eq 125 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == *"'memory' controller"* ]]
	[[ "$output" == *"cgroup v1/v2"* ]]
	run "$LCRUN" run --pids 10 -- true
	[ "$status" -eq 125 ]
	[[ "$output" == *"'pids' controller"* ]]
	run "$LCRUN" run --limits best-effort --memory 64M --cpus 1 --result "$BATS_TEST_TMPDIR/r.json" -- echo ran
	[ "$status" -eq 0 ]
	[[ "$output" == *ran* ]]
	[[ "$output" == *"not applied on this host: --memory, --cpus"* ]]
	[ "$(jq -r .limits_not_applied "$BATS_TEST_TMPDIR/r.json")" = "--memory, --cpus" ]
}

@test "bad limits: sizes, counts and names" {
	run "$LCRUN" run --memory 12Q -- true
	[ "$status" -eq 123 ]
	run "$LCRUN" run --pids 0 -- true
	[ "$status" -eq 123 ]
	run "$LCRUN" run --cpus abc -- true
	[ "$status" -eq 123 ]
	run "$LCRUN" run --limits nosuchset -- true
	[ "$status" -eq 120 ]
	[[ "$output" == *"no limit set named 'nosuchset'"* ]]
}
