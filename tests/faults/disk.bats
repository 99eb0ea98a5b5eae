#!/usr/bin/env bats
# A full disk: the store ($LCRUN_ROOT, and with it lcd.db and lcd's task
# logs) on a small ext4 of the test's own (a loop device; 5% of it kept
# for root, as mkfs.ext4 does by default: a sandbox's writes meet the full
# disk first, lcd's and lcrun's own a little later), filled up during a
# snapshot, an image build, an upload through lcd and a task's log.
# Each fails with one line naming the full disk (ENOSPC: "No space left on
# device"), lcd keeps serving reads, nothing already stored is damaged
# (the invariants of faults-lib.bash: images verify by digest, the store's
# temporary files are gone; lcd.db passes PRAGMA integrity_check), and
# the same request works once space is freed.  Root; no test build needed.

load faults-lib
load ../integration/lcd-lib

ENOSPC="No space left on device"

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root"
	command -v mkfs.ext4 >/dev/null && command -v fallocate >/dev/null || skip "needs mkfs.ext4 and fallocate"
	BIN=$(dirname "$LCRUN")
	F=$(mktemp -d /tmp/lcrun-disk.XXXXXX)
	T=$F
	truncate -s 128M "$F/disk.img"
	mkfs.ext4 -q -F "$F/disk.img"
	mkdir "$F/disk"
	mount -o loop "$F/disk.img" "$F/disk" || skip "cannot mount a loop device here"
	FAULTS_OWN_MOUNT=$F/disk
	export LCRUN_ROOT="$F/disk/root" LCRUN_STATE_DIR="$F/state"
	unset LCRUN_FAULT LCRUN_FAULT_LOG
	SEEN_IDS=
	LCD=$BIN/lcd LCCTL=$BIN/lcctl
	export LCD_SOCKET="$F/lcd.sock"
}

teardown() {
	stop_lcd
	lcd_leftovers_remove >/dev/null 2>&1 || true
	faults_teardown
}

# Fill the disk but for KB kilobytes and the blocks kept for root (the
# filler is one file: freeing space is removing it).
fill_but() { # KB
	rm -f "$F/disk/filler"
	sync -f "$F/disk"
	local avail
	avail=$(df -k --output=avail "$F/disk" | tail -1)
	[ "$avail" -gt "$1" ]
	fallocate -l $(((avail - $1) * 1024)) "$F/disk/filler"
}
free_space() { rm -f "$F/disk/filler" "$F/disk/filler2"; }
# ... and root's blocks too: nothing left for lcd's own writes
fill_all() {
	sync -f "$F/disk"
	local free
	free=$(stat -f -c '%f * %S' "$F/disk")
	fallocate -l $(($free)) "$F/disk/filler2" || true
	head -c 1000000 /dev/zero >>"$F/disk/filler2" 2>/dev/null || true
}

# CMD failed with exactly one line on stderr, naming the full disk.
one_line_enospc() { # (after run)
	echo "$output"
	[ "$status" -ne 0 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "${lines[0]}" == *"$ENOSPC"* ]]
}

@test "disk: a snapshot on a full store fails naming ENOSPC; the sandbox runs on, stored images verify; it works once space is freed" {
	sb=$("$LCRUN" create)
	"$LCRUN" exec "$sb" -- sh -c 'head -c 1000000 /dev/urandom >/root/small'
	"$LCRUN" snapshot "$sb" before >/dev/null
	"$LCRUN" exec "$sb" -- sh -c 'head -c 20000000 /dev/urandom >/root/big'
	fill_but 6000
	run "$LCRUN" snapshot "$sb" after
	one_line_enospc
	if "$LCRUN" image inspect after >/dev/null 2>&1; then
		echo "a snapshot that failed is listed" >&2
		false
	fi
	# not left frozen, and nothing stored damaged
	[ "$(timeout 10 "$LCRUN" exec "$sb" -- echo alive)" = alive ]
	faults_check
	free_space
	"$LCRUN" snapshot "$sb" after
	[ "$("$LCRUN" run --image after -- sh -c 'wc -c </root/big')" = 20000000 ]
	"$LCRUN" rm -f "$sb"
}

@test "disk: an image build on a full store fails naming ENOSPC at its step; the name keeps its image; it works once space is freed" {
	mkdir "$F/def"
	echo v1 >"$F/def/version"
	cat >"$F/def/b.json" <<-'EOF'
	{"name": "built", "steps": [{"copy": "version", "to": "/version"}, {"run": "head -c 20000000 /dev/urandom >/big"}]}
	EOF
	echo '{"name": "built", "steps": [{"copy": "version", "to": "/version"}]}' >"$F/def/a.json"
	"$LCRUN" image build "$F/def/a.json" >/dev/null 2>&1
	fill_but 30000
	run "$LCRUN" image build "$F/def/b.json"
	echo "$output"
	[ "$status" -ne 0 ]
	# the build's progress lines, then one line naming the full disk
	[ "$(printf '%s\n' "${lines[@]}" | grep -c '^lcrun: ')" -eq 1 ]
	[[ "${lines[-1]}" == "lcrun: "*"$ENOSPC"* ]]
	# the name still has the image it had
	[ "$("$LCRUN" run --image built -- sh -c 'cat /version; test -e /big && echo big')" = v1 ]
	faults_check
	free_space
	"$LCRUN" image build "$F/def/b.json" >/dev/null 2>&1
	[ "$("$LCRUN" run --image built -- sh -c 'wc -c </big')" = 20000000 ]
}

# lcd's reads on a full disk: its status, the sandboxes, the images, the
# tasks, a download, an exec.
lcd_reads() { # SB
	"$LCCTL" status >/dev/null
	"$LCCTL" sandbox ls --json | jq -e --arg s "$1" 'any(.[]; .id == $s)' >/dev/null
	curl -sf --unix-socket "$LCD_SOCKET" http://lcd/v1/images | jq -e '.images | length >= 1' >/dev/null
	"$LCCTL" task list --json | jq -e 'length >= 0' >/dev/null
	[ "$("$LCCTL" sandbox exec "$1" -- cat /root/mark)" = v1 ]
	"$LCCTL" sandbox cp "$1:/root/mark" "$F/mark.down"
	[ "$(cat "$F/mark.down")" = v1 ]
}

@test "disk: lcd on a full disk: an upload and a snapshot fail naming it, reads are served, lcd.db is whole; both work once space is freed" {
	start_lcd
	sb=$("$LCCTL" sandbox create)
	"$LCCTL" sandbox exec "$sb" -- sh -c 'echo v1 >/root/mark'
	"$LCCTL" sandbox snapshot "$sb" kept >/dev/null
	head -c 20000000 /dev/urandom >"$F/up"
	"$LCCTL" sandbox exec "$sb" -- sh -c 'echo old >/root/up'
	before=$("$LCCTL" sandbox exec "$sb" -- ls -A /root)
	fill_but 8000
	run "$LCCTL" sandbox cp "$F/up" "$sb:/root/up"
	one_line_enospc
	# what was there stays whole, and the part written is gone
	[ "$("$LCCTL" sandbox exec "$sb" -- cat /root/up)" = old ]
	[ "$("$LCCTL" sandbox exec "$sb" -- ls -A /root)" = "$before" ]
	lcd_reads "$sb"
	[ "$(sqlite3 "$LCRUN_ROOT/lcd.db" 'PRAGMA integrity_check')" = ok ]
	# a snapshot whose layer does not fit
	free_space
	"$LCCTL" sandbox exec "$sb" -- rm -f /root/up
	"$LCCTL" sandbox exec "$sb" -- sh -c 'head -c 20000000 /dev/urandom >/root/big'
	fill_but 6000
	run "$LCCTL" sandbox snapshot "$sb" snap
	one_line_enospc
	lcd_reads "$sb"
	if curl -sf --unix-socket "$LCD_SOCKET" http://lcd/v1/images | jq -e '.images[] | select(.name == "snap")' >/dev/null; then
		echo "lcd lists the snapshot that failed" >&2
		false
	fi
	[ "$(sqlite3 "$LCRUN_ROOT/lcd.db" 'PRAGMA integrity_check')" = ok ]
	# lcd's own writes (lcd.db) on a disk full for root too
	fill_all
	# (lcd.db's write-ahead log reuses the room it has: a few writes may
	# still fit in it)
	for i in $(seq 40); do
		run sh -c "head -c 30000 /dev/urandom | base64 -w0 | '$LCCTL' secret set BIG$i"
		[ "$status" -eq 0 ] || break
	done
	one_line_enospc
	lcd_reads "$sb"
	[ "$(sqlite3 "$LCRUN_ROOT/lcd.db" 'PRAGMA integrity_check')" = ok ]
	faults_check
	kill -0 "$LCD_PID"
	free_space
	"$LCCTL" sandbox cp "$F/up" "$sb:/root/up"
	"$LCCTL" sandbox cp "$sb:/root/up" "$F/up.down"
	cmp "$F/up" "$F/up.down"
	"$LCCTL" sandbox exec "$sb" -- rm /root/up # (room for the image to be unpacked)
	"$LCCTL" sandbox snapshot "$sb" snap
	sb2=$("$LCCTL" sandbox create --image snap)
	[ "$("$LCCTL" sandbox exec "$sb2" -- sh -c 'cat /root/mark; wc -c </root/big')" = "v1
20000000" ]
	"$LCCTL" sandbox rm "$sb" "$sb2"
	[ "$(sqlite3 "$LCRUN_ROOT/lcd.db" 'PRAGMA integrity_check')" = ok ]
}

@test "disk: a task whose log fills the disk ends failed naming it; lcd serves on; the next task's log is whole once space is freed" {
	cat >"$F/app.json" <<-'EOF'
	{"name": "dk", "functions": {
	  "chatty": {"command": ["/bin/sh", "-c", "set -e; head -c 30000000 /dev/zero | tr '\\0' x; echo; echo done-writing"]},
	  "short": {"command": ["/bin/sh", "-c", "echo short-and-whole"]}
	}}
	EOF
	# (the task's upper layer in the store, not on a disk image of its
	# own: its teardown gives back next to nothing before lcd looks)
	echo '{"task_disk": 0}' >"$F/lcd.json"
	start_lcd
	"$LCCTL" deploy "$F/app.json" >/dev/null
	fill_but 10000
	t=$("$LCCTL" run -d dk:chatty)
	wait_state "$t" failed 60
	"$LCCTL" task show "$t" | jq -r .error | tee "$F/error"
	[ "$(wc -l <"$F/error")" -eq 1 ]
	grep -q "$ENOSPC" "$F/error"
	# lcd serves on: reads, and the task's log as far as it got
	"$LCCTL" status >/dev/null
	[ "$("$LCCTL" task list --json | jq length)" -eq 1 ]
	"$LCCTL" task logs "$t" | head -c 100 | grep -q '^xxxx'
	[ "$(sqlite3 "$LCRUN_ROOT/lcd.db" 'PRAGMA integrity_check')" = ok ]
	free_space
	t2=$("$LCCTL" run -d dk:short)
	wait_state "$t2" succeeded 60
	"$LCCTL" task logs "$t2" | grep -qx short-and-whole
	[ "$(sqlite3 "$LCRUN_ROOT/lcd.db" 'PRAGMA integrity_check')" = ok ]
}

# A task that ends while lcd.db's disk is full for root too: its end cannot
# be written then.  It must not stay "running" until lcd's next start: once
# space is freed it is recorded as failed, the reason naming the full disk.
@test "disk: a task that ends while lcd.db's disk is full is recorded failed, naming ENOSPC, once space is freed" {
	cat >"$F/app.json" <<-'EOF2'
	{"name": "dk", "functions": {
	  "slow": {"command": ["/bin/sh", "-c", "sleep 4; echo slept"]},
	  "short": {"command": ["/bin/sh", "-c", "echo short-and-whole"]}
	}}
	EOF2
	echo '{"task_disk": 0}' >"$F/lcd.json"
	start_lcd
	"$LCCTL" deploy "$F/app.json" >/dev/null
	t=$("$LCCTL" run -d dk:slow)
	wait_state "$t" running 30
	fill_all
	# lcd.db's write-ahead log reuses the room it has: write until a
	# write fails, big ones, then small ones
	local i refused=
	for i in $(seq 60); do
		if ! head -c 30000 /dev/urandom | base64 -w0 | "$LCCTL" secret set "BIG$i" >/dev/null 2>&1; then
			refused=1
			break
		fi
	done
	for i in $(seq 200); do
		echo x | "$LCCTL" secret set "S$i" >/dev/null 2>&1 || { refused=1; break; }
	done
	[ -n "$refused" ]
	# the task ends; its end is not written
	for _ in $(seq 300); do
		grep -q "task $t: cannot record its end" "$F/lcd.log" && break
		sleep 0.1
	done
	grep "task $t: cannot record its end" "$F/lcd.log"
	# (a try may already have found room: lcd.db's log reuses what it has)
	local st
	st=$(state_of "$t")
	echo "before space is freed: $st"
	[ "$st" = running ] || [ "$st" = failed ]
	free_space
	wait_state "$t" failed 20
	"$LCCTL" task show "$t" | jq -r .error | tee "$F/error"
	[ "$(wc -l <"$F/error")" -eq 1 ]
	grep -q "$ENOSPC" "$F/error"
	"$LCCTL" task list --json | jq -e --arg t "$t" '.[] | select(.id == $t) | .state == "failed"'
	[ "$(sqlite3 "$LCRUN_ROOT/lcd.db" 'PRAGMA integrity_check')" = ok ]
	t2=$("$LCCTL" run -d dk:short)
	wait_state "$t2" succeeded 60
	"$LCCTL" task logs "$t2" | grep -qx short-and-whole
}
