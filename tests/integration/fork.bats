#!/usr/bin/env bats
# lcrun fork: a batch of sandboxes from one image, each made as `run` makes
# one (its own id, upper, cgroup, namespaces, filter), though the batch
# prepares some parts once and removes its directories together.

load helpers

setup_file() {
	mkdir -p /var/lib/lcrun/tests
	FT=$(mktemp -d /var/lib/lcrun/tests/fork-bats.XXXXXX)
	export FT LCRUN_ROOT=$FT/root LCRUN_STATE_DIR=$FT/state
	"$LCRUN" run --keep --name src -- sh -c 'echo base >/srv/marker' >/dev/null
	"$LCRUN" snapshot src img >/dev/null
	"$LCRUN" rm -f src
}

teardown_file() {
	rm -rf "$FT"
	rmdir /var/lib/lcrun/tests 2>/dev/null || true
}

setup() {
	LCRUN_LIB=$LCRUN_ROOT LCRUN_RUN=$LCRUN_STATE_DIR
	T=$BATS_TEST_TMPDIR
	host_snapshot
}

teardown() {
	assert_host_clean
}

# One line per sandbox: its namespaces | what run's security settings show.
PROBE='ns=$(for n in user mnt net pid uts ipc cgroup; do readlink /proc/self/ns/$n; done | tr "\n" " ")
sec=$(grep -E "^(CapEff|CapBnd|NoNewPrivs|Seccomp):" /proc/self/status | tr "\t\n" "  ")
map=$(cat /proc/self/uid_map /proc/self/gid_map | tr -s " \n" "  ")
un=$(unshare -U true 2>/dev/null && echo unshared || echo refused)
test ! -e /srv/mine && echo x >/srv/mine && test "$(cat /srv/marker)" = base && echo "$ns|$sec|$map|$(id -u)|$un"'

# Mount namespaces some process holds open (an fd) that no process is in:
# what a remover holds for a moment, or what a leak would keep.
held_mntns() {
	find /proc/[0-9]*/ns/mnt -maxdepth 0 -printf '%l\n' 2>/dev/null | sort -u >"$T/live-mntns"
	find /proc/[0-9]*/fd -lname 'mnt:*' -printf '%l\n' 2>/dev/null | sort -u | comm -23 - "$T/live-mntns"
}

# Wait (up to 10 s) until N sandboxes run (lcrun ps), else fail.
wait_running() {
	local _
	for _ in $(seq 200); do
		[ "$("$LCRUN" ps | grep -c ' running ')" -eq "$1" ] && return 0
		sleep 0.05
	done
	false
}

# lcrun fork img --count N ARGS… -- sleep 30, a TERM to it once all N
# run: each sandbox, and lcrun fork, end with 143 (128 + 15).
term_batch() {
	local n=$1 st=0 fpid
	shift
	"$LCRUN" fork img --count "$n" "$@" -- sleep 30 2>"$T/err" &
	fpid=$!
	wait_running "$n"
	kill -TERM "$fpid"
	wait "$fpid" || st=$?
	cat "$T/err"
	[ "$st" -eq 143 ]
	[ "$(grep -c 'exited 143' "$T/err")" -eq "$n" ]
}

# Wait (up to 30 s) until all ten are up: a namespace's number may be
# reused once its sandbox ended.
BARRIER='mktemp /bar/XXXXXX >/dev/null; i=0
while [ "$(ls /bar | wc -l)" -lt 10 ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done'

@test "fork: ten sandboxes, each its own namespaces and upper, each with run's ids, caps and filter" {
	mkdir -m 1777 "$T/bar"
	run timeout -k 2 120 "$LCRUN" fork img --count 10 --bind "$T/bar:/bar" --result "$T/r.json" -- \
		sh -c "$BARRIER; $PROBE"
	echo "$output"
	[ "$status" -eq 0 ]
	out=$(echo "$output" | grep '|')
	[ "$(echo "$out" | wc -l)" -eq 10 ]
	# every namespace differs from the other nine's
	for col in 1 2 3 4 5 6 7; do
		[ "$(echo "$out" | cut -d'|' -f1 | awk -v c=$col '{ print $c }' | sort -u | wc -l)" -eq 10 ]
	done
	# the rest is what one `lcrun run` of the image shows
	one=$(timeout -k 2 60 "$LCRUN" run --image img -- sh -c "$PROBE")
	[ -n "$one" ]
	[ "$(echo "$out" | cut -d'|' -f2- | sort -u)" = "$(echo "$one" | cut -d'|' -f2-)" ]
	[[ "$one" == *"Seccomp: 2"*"|0|refused" ]]
	python3 - "$T/r.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert len(r) == 10 and len({x["id"] for x in r}) == 10, r
assert sorted(x["index"] for x in r) == list(range(1, 11)), r
assert all(x["exit_code"] == 0 for x in r), r
PY
}

@test "fork: each sandbox has a cgroup of its own while it runs, gone with it" {
	cg=$(cgroup2_root)
	[ -n "$cg" ] || skip "no cgroup v2 mount"
	timeout -k 2 60 "$LCRUN" fork img --count 3 --result "$T/r.json" -- sleep 3 2>"$T/err" &
	fpid=$!
	for _ in $(seq 100); do
		[ "$(ls "$LCRUN_STATE_DIR" | grep -c '^[0-9a-f]\{12\}$')" -eq 3 ] && break
		sleep 0.05
	done
	ids=$(ls "$LCRUN_STATE_DIR" | grep '^[0-9a-f]\{12\}$')
	[ "$(echo "$ids" | wc -l)" -eq 3 ]
	for _ in $(seq 100); do
		n=0
		for id in $ids; do [ -n "$(cat "$cg/lcrun/$id/cgroup.procs" 2>/dev/null)" ] && n=$((n + 1)); done
		[ "$n" -eq 3 ] && break
		sleep 0.05
	done
	[ "$n" -eq 3 ]
	# no process is in two of them
	[ "$(for id in $ids; do cat "$cg/lcrun/$id/cgroup.procs"; done | sort | uniq -d)" = "" ]
	wait "$fpid"
	for id in $ids; do
		[ ! -d "$cg/lcrun/$id" ]
		grep -q "\"$id\"" "$T/r.json"
	done
	# the batch's directories went to one trash entry, removed in the
	# background at nice 19 (slow on a busy machine: up to 60 s here)
	for _ in $(seq 600); do [ -z "$(ls "$LCRUN_ROOT/trash")" ] && break; sleep 0.1; done
	[ -z "$(ls "$LCRUN_ROOT/trash")" ]
	[ -z "$(ls "$LCRUN_ROOT/sandboxes")" ]
}

@test "fork: the batch's remover takes its sandboxes' state and the mount namespaces held for it" {
	before=$(held_mntns)
	timeout -k 2 60 "$LCRUN" fork img --count 3 --result "$T/r.json" -- true 2>/dev/null
	ids=$(python3 -c 'import json, sys; print("\n".join(x["id"] for x in json.load(open(sys.argv[1]))))' "$T/r.json")
	[ "$(echo "$ids" | wc -l)" -eq 3 ]
	# gone from the state directory when lcrun fork returned: ps, exec
	# and names no longer find them
	for id in $ids; do [ ! -e "$LCRUN_STATE_DIR/$id" ]; done
	run "$LCRUN" ps
	for id in $ids; do [[ "$output" != *"$id"* ]]; done
	# and gone for good once the batch's removal is over
	run "$LCRUN" gc --wait
	[ "$status" -eq 0 ]
	for id in $ids; do [ ! -e "$LCRUN_STATE_DIR/trash-state/$id" ]; done
	[ -z "$(ls "$LCRUN_ROOT/trash")" ]
	[ -z "$(ls "$LCRUN_ROOT/sandboxes")" ]
	[ "$(held_mntns)" = "$before" ]
	# a run's remover (which may stay on as the spare network namespaces'
	# holder) lets its held mount namespaces go too
	"$LCRUN" run --image img -- true
	run "$LCRUN" gc --wait
	[ "$status" -eq 0 ]
	[ "$(held_mntns)" = "$before" ]
}

@test "run and fork: a host filesystem unmounted while sandboxes run is let go, not pinned by a copy of the host's mounts" {
	truncate -s 16M "$T/fs.img"
	mkfs.ext4 -q -F "$T/fs.img"
	dev=$(losetup --find --show "$T/fs.img" 2>/dev/null) || skip "no loop device"
	mkdir "$T/m"
	mount "$dev" "$T/m"
	sb=/proc/fs/ext4/$(basename "$dev") # there while the filesystem is mounted anywhere
	[ -d "$sb" ]
	"$LCRUN" run -- sleep 60 &
	rpid=$!
	"$LCRUN" fork img --count 2 -- sleep 60 2>/dev/null &
	fpid=$!
	# all three started (each staging process copied the host's mounts,
	# this one included, before pid 1 was ready)
	wait_running 3
	umount "$T/m"
	for _ in $(seq 30); do [ ! -e "$sb" ] && break; sleep 0.1; done
	[ -e "$sb" ] && pinned=yes || pinned=no
	kill -TERM "$rpid" "$fpid"
	wait "$rpid" || true
	wait "$fpid" || true
	"$LCRUN" gc --wait
	losetup -d "$dev"
	[ "$pinned" = no ]
}

@test "fork: a failing sandbox reports its own code; lcrun fork exits with the first failing one's" {
	mkdir -m 1777 "$T/claim"
	# each sandbox claims a number (mkdir is atomic) and exits with (n-1)*10
	run timeout -k 2 60 "$LCRUN" fork img --count 3 --bind "$T/claim:/claim" --result "$T/r.json" -- sh -c \
		'for n in 1 2 3; do mkdir /claim/$n 2>/dev/null && exit $(( (n - 1) * 10 )); done; exit 99'
	echo "$output"
	python3 - "$T/r.json" "$status" "$output" <<'PY'
import json, re, sys
r = json.load(open(sys.argv[1]))
assert sorted(x["exit_code"] for x in r) == [0, 10, 20], r
# every line names its sandbox with that sandbox's own code
for x in r:
    assert "fork %d/3: sandbox %s exited %d" % (x["index"], x["id"], x["exit_code"]) in sys.argv[3], x
first = next(x["exit_code"] for x in sorted(r, key=lambda x: x["index"]) if x["exit_code"])
assert int(sys.argv[2]) == first, (sys.argv[2], first)
PY
}

@test "fork: sandboxes that cannot be made each report why, and lcrun fork ends" {
	for n in 1 3; do
		run timeout -k 2 30 "$LCRUN" fork img --count $n --bind "$T/missing:/mnt" --result "$T/r.json" -- true
		echo "$output"
		# 124 would be the timeout: a batch whose last sandbox failed to
		# start must still end
		[ "$status" -ne 124 ]
		[ "$status" -ne 0 ]
		[ "$(echo "$output" | grep -c "^lcrun: fork [0-9]*/$n: bind source $T/missing: ")" -eq "$n" ]
		python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert len(r) == int(sys.argv[2]) and all("error" in x for x in r), r' "$T/r.json" $n
	done
	[ -z "$(ls "$LCRUN_STATE_DIR" | grep '^[0-9a-f]\{12\}$')" ]
	[ -z "$(ls "$LCRUN_ROOT/sandboxes")" ]
}

@test "fork: a signal that comes while sandboxes still start reaches each one as it starts, a terminal's too" {
	# TERM from kill, sent as soon as the first sandbox is begun: the
	# others get it once they run (twenty: on a slow machine too, most
	# are still to start when it comes)
	"$LCRUN" fork img --count 20 --result "$T/r.json" -- sleep 30 2>"$T/err" &
	fpid=$!
	for _ in $(seq 400); do
		[ -n "$(ls "$LCRUN_STATE_DIR" | grep '^[0-9a-f]\{12\}$')" ] && break
		sleep 0.005
	done
	kill -TERM "$fpid"
	st=0
	wait "$fpid" || st=$?
	cat "$T/err"
	[ "$st" -eq 143 ]
	[ "$(grep -c 'exited 143' "$T/err")" -eq 20 ]
	# ^C on lcrun fork's terminal: the kernel's SIGINT reaches the
	# running sandboxes itself; the rest get it from lcrun fork
	python3 - "$LCRUN" "$LCRUN_STATE_DIR" <<'PY'
import os, pty, re, sys, time
lcrun, state = sys.argv[1], sys.argv[2]
ids = lambda: [d for d in os.listdir(state) if re.fullmatch("[0-9a-f]{12}", d)]
t0 = time.monotonic()
pid, fd = pty.fork()
if pid == 0:
    os.execv(lcrun, [lcrun, "fork", "img", "--count", "20", "--", "sleep", "30"])
while not ids() and time.monotonic() - t0 < 10:
    time.sleep(0.005)
os.write(fd, b"\x03")
out = b""
while True:
    try:
        b = os.read(fd, 4096)
    except OSError:
        break
    if not b:
        break
    out += b
_, st = os.waitpid(pid, 0)
out = out.decode()
print(out)
assert out.count("exited 130") == 20, out
assert os.waitstatus_to_exitcode(st) == 130, st
assert time.monotonic() - t0 < 25, "the sleeps ran to their end"
PY
}

@test "fork: a custom seccomp profile is installed in every sandbox" {
	cat >"$T/p.json" <<'EOF'
{
  "defaultAction": "SCMP_ACT_ALLOW",
  "syscalls": [ { "names": ["uname"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13 } ]
}
EOF
	run timeout -k 2 60 "$LCRUN" fork img --count 4 --seccomp "$T/p.json" -- sh -c 'uname -r || exit 42'
	echo "$output"
	[ "$status" -eq 42 ]
	[ "$(echo "$output" | grep -c 'exited 42')" -eq 4 ]
	run timeout -k 2 60 "$LCRUN" fork img --count 2 --seccomp unconfined -- grep -q 'Seccomp:.0' /proc/self/status
	[ "$status" -eq 0 ]
}

@test "fork: a killed lcrun fork takes its sandboxes with it; lcrun gc removes what they left, not a live batch's" {
	cg=$(cgroup2_root)
	"$LCRUN" fork img --count 2 -- sleep 30 2>/dev/null &
	fpid=$!
	wait_running 2
	ids=$(ls "$LCRUN_STATE_DIR" | grep '^[0-9a-f]\{12\}$')
	[ "$(echo "$ids" | wc -l)" -eq 2 ]
	batch=$(ls -d "$LCRUN_ROOT"/trash/batch-*)
	[ -d "$batch" ]
	# live: gc leaves the batch's entry and its sandboxes alone
	run "$LCRUN" gc
	[ "$status" -eq 0 ]
	[ -d "$batch" ]
	[ "$("$LCRUN" ps | grep -c ' running ')" -eq 2 ]
	# lcrun fork killed: each pid 1 dies with it (its end of the sync
	# socket closed), and so does every process of the sandbox
	kill -KILL "$fpid"
	wait "$fpid" || true
	if [ -n "$cg" ]; then
		for id in $ids; do
			for _ in $(seq 200); do
				grep -q '^populated 0' "$cg/lcrun/$id/cgroup.events" && break
				sleep 0.05
			done
			grep -q '^populated 0' "$cg/lcrun/$id/cgroup.events"
		done
	fi
	# nobody removes what they left but gc: state, directory, cgroup, and
	# the batch's trash entry, which nobody holds a lock on any more
	run "$LCRUN" gc
	[ "$status" -eq 0 ]
	echo "$output"
	for id in $ids; do
		[[ "$output" == *"removed sandbox $id"* ]]
		[ ! -e "$LCRUN_STATE_DIR/$id" ]
		[ ! -e "$LCRUN_ROOT/sandboxes/$id" ]
		[ -z "$cg" ] || [ ! -e "$cg/lcrun/$id" ]
	done
	[[ "$output" == *"removed directory $batch"* ]]
	[ ! -e "$batch" ]
	[ -z "$(ls -A "$LCRUN_STATE_DIR/trash-state" 2>/dev/null)" ]
}

@test "fork: a TERM to lcrun fork reaches every sandbox; it still reports each and leaves nothing" {
	term_batch 3 --result "$T/r.json"
	python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert [x["exit_code"] for x in r] == [143] * 3, r' "$T/r.json"
	for _ in $(seq 600); do [ -z "$(ls "$LCRUN_ROOT/trash")" ] && break; sleep 0.1; done
	[ -z "$(ls "$LCRUN_ROOT/trash")" ]
	[ -z "$(ls "$LCRUN_ROOT/sandboxes")" ]
}

@test "fork with a network: each sandbox its own veth and address, a TERM reaches each, nothing left" {
	# nothing is sent anywhere: the sandboxes only look at their interfaces
	run timeout -k 2 120 "$LCRUN" fork img --count 3 --net allow --allow 192.0.2.1/32:443 --result "$T/r.json" -- \
		sh -c 'ip -4 -o addr show dev eth0 | awk "{ print \$4 }"'
	echo "$output"
	[ "$status" -eq 0 ]
	addrs=$(echo "$output" | grep -E '^[0-9.]+/30$' | sort -u)
	[ "$(echo "$addrs" | wc -l)" -eq 3 ]
	term_batch 3 --net allow --allow 192.0.2.1/32:443
	# the veths, chains and leases go with lcrun-net helpers, whose end
	# teardown's assert_host_clean waits for before it compares
}

@test "sandboxes/ spreads its directories on ext4 (lsattr: T), the state directory does not" {
	[ "$(stat -f -c %T "$LCRUN_ROOT")" = ext2/ext3 ] || skip "not on ext2/3/4"
	[ "$(stat -f -c %T "$LCRUN_STATE_DIR")" = ext2/ext3 ] || skip "the state directory is not on ext2/3/4"
	# as an older lcrun left it
	chattr +T "$LCRUN_STATE_DIR"
	run timeout -k 2 60 "$LCRUN" fork img --count 2 -- true
	[ "$status" -eq 0 ]
	[[ "$(lsattr -d "$LCRUN_ROOT/sandboxes" | cut -d' ' -f1)" == *T* ]]
	[[ "$(lsattr -d "$LCRUN_STATE_DIR" | cut -d' ' -f1)" != *T* ]]
}
