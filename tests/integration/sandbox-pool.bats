#!/usr/bin/env bats
# lcd's warm pool (lcd.json "sandbox_pool"): sandboxes made ahead and
# handed to creates that fit.  What a user must not be able to tell apart:
# a pooled sandbox against a fresh one (ids, namespaces, upper, cgroup, the
# API's view, created and ttl); what must not leak: members in listings,
# quotas, history, or on the host after lcd stops or is killed.  A private
# lcd per test (lcd-lib.bash).  No timings are asserted.  Needs root.

FIXTURES="$BATS_TEST_DIRNAME/../fixtures/lcd"

load lcd-lib

setup() {
	lcd_setup
	LCRUN="${LCRUN:-$BIN/lcrun}"
}

teardown() {
	local rc=0
	stop_lcd
	if [ -n "${T:-}" ] && [ -d "$T/state" ]; then
		lcd_leftovers_remove || rc=1
		"$LCRUN" gc >/dev/null 2>&1 || true
	fi
	lcd_teardown
	return $rc
}

pool_config() { # IMAGE SIZE [DISK]: with DISK, the members' and the tasks' disk
	if [ -n "${3:-}" ]; then
		printf '{"sandbox_pool": [{"image": "%s", "size": %s, "disk": "%s"}], "task_disk": "%s"}\n' "$1" "$2" "$3" "$3" \
			>"$T/lcd.json"
	else
		printf '{"sandbox_pool": [{"image": "%s", "size": %s}]}\n' "$1" "$2" >"$T/lcd.json"
	fi
}

running() { "$LCRUN" ps --json | jq '[.[] | select(.state == "running")] | length'; }

members() { # the runtime's sandboxes lcd has no record of: the pool's
	"$LCRUN" ps --json | jq -r '.[].id' | sort >"$T/all"
	lcd_sql 'select id from sandboxes' | sort >"$T/rows"
	comm -23 "$T/all" "$T/rows"
}

wait_pool() { # N: until the pool holds N sandboxes
	for _ in $(seq 300); do
		[ "$(members | wc -l)" -eq "$1" ] && [ "$(running)" -ge "$1" ] && return 0
		sleep 0.1
	done
	echo "the pool holds $(members | wc -l), not $1" >&2
	cat "$T/lcd.log" >&2
	return 1
}

ns_of() { # ID NS: the inode of pid 1's namespace
	readlink "/proc/$("$LCRUN" inspect "$1" | jq -r .pid)/ns/$2"
}

upper_of() { "$LCRUN" inspect "$1" | jq -r '.uppers[0].path'; }

@test "sandbox pool: off by default; bad config is refused with one line naming the key" {
	start_lcd
	"$LCCTL" sandbox create >/dev/null
	[ "$("$LCRUN" ps --json | jq length)" -eq 1 ]
	if grep -q "sandbox pool" "$T/lcd.log"; then false; fi
	stop_lcd
	check() { # CONFIG MESSAGE
		echo "$1" >"$T/bad.json"
		run "$LCD" --socket "$T/bad.sock" --config "$T/bad.json"
		[ "$status" -eq 121 ] || { echo "status $status: $output" >&2; return 1; }
		[ "$output" = "lcd: config $T/bad.json: $2" ] || { echo "got: $output" >&2; return 1; }
	}
	check '{"sandbox_pool": {"image": "host"}}' 'sandbox_pool: expected an array of {"image": NAME, "size": N}'
	check '{"sandbox_pool": ["host"]}' 'sandbox_pool[0]: expected {"image": NAME, "size": N}'
	check '{"sandbox_pool": [{"image": "host", "size": 0}]}' 'sandbox_pool[0].size: expected an integer, 1 to 64'
	check '{"sandbox_pool": [{"image": "host", "size": 65}]}' 'sandbox_pool[0].size: expected an integer, 1 to 64'
	check '{"sandbox_pool": [{"image": "host", "size": "2"}]}' 'sandbox_pool[0].size: expected an integer, 1 to 64'
	check '{"sandbox_pool": [{"image": "../x", "size": 1}]}' 'sandbox_pool[0].image: expected "host" or an image name'
	check '{"sandbox_pool": [{"size": 1}]}' 'sandbox_pool[0].image: expected "host" or an image name'
	check '{"sandbox_pool": [{"image": "host", "size": 1, "net": "open"}]}' 'sandbox_pool[0].net: unknown key'
	check '{"sandbox_pool": [{"image": "host", "size": 1, "disk": "1M"}]}' 'sandbox_pool[0].disk: expected a size of at least 16M (like "8G")'
	check '{"sandbox_pool": [{"image": "host", "size": 1}, {"image": "host", "size": 2}]}' \
		'sandbox_pool[1].image: host is pooled already (sandbox_pool[0])'
	[ ! -e "$T/bad.sock" ]
	[ "$("$LCRUN" ps --json | jq length)" -eq 1 ] # nothing made
}

@test "sandbox pool: a pooled sandbox is indistinguishable from a fresh one and has nothing of another's" {
	pool_config host 2
	start_lcd
	wait_pool 2
	pool=$(members)
	# members are nobody's: not listed, not found, not in the history
	[ "$("$LCCTL" sandbox ls --json | jq length)" -eq 0 ]
	[ "$(api GET '/sandboxes?history=1' | head -1 | jq '.sandboxes | length')" -eq 0 ]
	run api GET "/sandboxes/$(echo "$pool" | head -1)"
	[ "${lines[1]}" = 404 ]
	sleep 1.1 # the members were made before t0
	t0=$(date +%s%3N)
	a=$("$LCCTL" sandbox create --name tenant-a -e WHO=a --label t=a)
	b=$("$LCCTL" sandbox create -e WHO=b)
	c=$("$LCCTL" sandbox create -e WHO=c -w /) # a workdir: not from the pool, made fresh
	grep -q "sandbox $a created for the operator (image host, from the pool)" "$T/lcd.log"
	grep -q "sandbox $b created for the operator (image host, from the pool)" "$T/lcd.log"
	grep -q "sandbox $c created for the operator (image host)$" "$T/lcd.log"
	echo "$pool" | grep -qx "$a"
	# their own ids, namespaces, cgroups and upper layers
	[ "$(printf '%s\n' "$a" "$b" "$c" | sort -u | wc -l)" -eq 3 ]
	for ns in user mnt pid net uts ipc cgroup; do
		[ "$(printf '%s\n' "$(ns_of "$a" $ns)" "$(ns_of "$b" $ns)" "$(ns_of "$c" $ns)" | sort -u | wc -l)" -eq 3 ]
	done
	cgs=$(for s in "$a" "$b" "$c"; do "$LCRUN" inspect "$s" | jq -r .cgroup; done)
	[ "$(echo "$cgs" | sort -u | wc -l)" -eq 3 ]
	for s in "$a" "$b" "$c"; do
		cg=$("$LCRUN" inspect "$s" | jq -r .cgroup)
		pid=$("$LCRUN" inspect "$s" | jq -r .pid)
		grep -qx "$pid" "$cg/cgroup.procs"
	done
	[ "$(printf '%s\n' "$(upper_of "$a")" "$(upper_of "$b")" "$(upper_of "$c")" | sort -u | wc -l)" -eq 3 ]
	# the same id range as a fresh one (every sandbox of this host has it), the same hostname
	for s in "$a" "$b"; do
		[ "$("$LCRUN" inspect "$s" | jq -c '[.uid_base, .uid_count]')" = "$("$LCRUN" inspect "$c" | jq -c '[.uid_base, .uid_count]')" ]
		[ "$("$LCCTL" sandbox exec "$s" -- cat /proc/self/uid_map)" = "$("$LCCTL" sandbox exec "$c" -- cat /proc/self/uid_map)" ]
	done
	[ "$("$LCCTL" sandbox exec tenant-a -- hostname)" = "$("$LCCTL" sandbox exec "$c" -- hostname)" ]
	# the upper layer holds what a fresh one's holds
	for s in "$a" "$b"; do
		diff <(cd "$(upper_of "$s")" && find . | sort) <(cd "$(upper_of "$c")" && find . | sort)
	done
	# the request's env, name and labels; nothing of another's
	[ "$("$LCCTL" sandbox exec tenant-a -- sh -c 'echo $WHO')" = a ]
	[ "$("$LCCTL" sandbox exec "$b" -- sh -c 'echo $WHO')" = b ]
	# the API's view has the shape of a fresh one's, and says what was asked
	diff <("$LCCTL" sandbox show "$a" | jq -S 'keys') <("$LCCTL" sandbox show "$c" | jq -S 'keys')
	"$LCCTL" sandbox show "$a" | jq -e --arg a "$a" '.id == $a and .name == "tenant-a" and .labels == {"t": "a"} and .state == "running"
		and .owner.kind == "operator" and .limits.memory == -1 and .net == "none" and .ttl == 0 and .expires == null'
	# created: when it was asked for, not when the pool made it
	for s in "$a" "$b"; do
		"$LCCTL" sandbox show "$s" | jq -e --argjson t0 "$t0" '.created >= $t0'
		"$LCRUN" inspect "$s" | jq -e --argjson t0 "$t0" '.created >= $t0'
	done
	[ "$("$LCCTL" sandbox ls --json | jq length)" -eq 3 ]
	# a tenant writes everywhere it can, then is deleted; the sandboxes made
	# after it (the pool's replacements) have none of it
	"$LCCTL" sandbox exec tenant-a -- sh -c 'echo a-was-here > /root/mark; echo x > /etc/mark-a; echo t > /tmp/mark; echo v > /var/tmp/mark'
	"$LCCTL" sandbox rm tenant-a
	wait_pool 2
	d=$("$LCCTL" sandbox create --name tenant-a)
	grep -q "sandbox $d created for the operator (image host, from the pool)" "$T/lcd.log"
	[ "$d" != "$a" ]
	run "$LCCTL" sandbox exec tenant-a -- sh -c 'ls /root/mark /etc/mark-a /tmp/mark /var/tmp/mark 2>&1; echo "[$WHO]"'
	[ "${lines[-1]}" = "[]" ]
	[ "$(echo "$output" | grep -c 'No such file')" -eq 4 ]
	[ -z "$(cd "$(upper_of "$d")" && find . -name 'mark*')" ]
	# a deleted sandbox is gone for good: never back in the pool
	run "$LCRUN" inspect "$a"
	[ "$status" -eq 120 ]
	if members | grep -qx "$a"; then false; fi
}

@test "sandbox pool: ttl and idle_timeout count from the create; a request that does not fit goes the usual way" {
	pool_config host 1
	start_lcd
	wait_pool 1
	sleep 2.2 # older than the ttl below when it is claimed
	t0=$(date +%s%3N)
	t=$("$LCCTL" sandbox create --ttl 2)
	grep -q "sandbox $t created for the operator (image host, from the pool)" "$T/lcd.log"
	"$LCCTL" sandbox show "$t" | jq -e --argjson t0 "$t0" '.state == "running" and .ttl == 2 and .expires >= $t0 + 2000'
	wait_pool 1
	i=$("$LCCTL" sandbox create --idle-timeout 1)
	grep -q "sandbox $i created for the operator (image host, from the pool)" "$T/lcd.log"
	for _ in $(seq 100); do
		[ "$("$LCRUN" inspect "$i" | jq -r .status)" = stopped ] && ! "$LCRUN" inspect "$t" >/dev/null 2>&1 && break
		sleep 0.1
	done
	[ "$("$LCRUN" inspect "$i" | jq -r .stop_reason)" = "idle timeout" ]
	run "$LCRUN" inspect "$t"
	[ "$status" -eq 120 ] # removed by its ttl
	run "$LCCTL" sandbox show "$t"
	[ "$status" -eq 120 ]
	# requests a made sandbox cannot take go the usual way, and work
	wait_pool 1
	member=$(members)
	for args in "--limits best-effort" "-u 1000" "-w /tmp" "--net none --limits best-effort"; do
		# shellcheck disable=SC2086
		s=$("$LCCTL" sandbox create $args)
		grep -q "sandbox $s created for the operator (image host)$" "$T/lcd.log"
	done
	[ "$(members)" = "$member" ] # untouched
	# a name taken is the request's error (409), and the member stays
	"$LCCTL" sandbox create --name taken >/dev/null
	wait_pool 1
	member=$(members)
	run api POST /sandboxes '{"name": "taken"}'
	[ "${lines[1]}" = 409 ]
	[ "$(members)" = "$member" ]
	# a member that vanished is not handed out: the create still works
	"$LCRUN" rm -f "$member" >/dev/null
	s=$("$LCCTL" sandbox create -e K=v)
	[ "$("$LCCTL" sandbox exec "$s" -- sh -c 'echo $K')" = v ]
	[ "$s" != "$member" ]
	# a pool whose image does not exist says so once and never fails a create
	stop_lcd
	for id in $("$LCRUN" ps --json | jq -r '.[].id'); do "$LCRUN" rm -f "$id" >/dev/null; done
	pool_config no/such-image 2
	start_lcd
	for _ in $(seq 50); do grep -q "sandbox pool: cannot make a sandbox of no/such-image" "$T/lcd.log" && break; sleep 0.1; done
	[ "$(grep -c "sandbox pool: cannot make a sandbox of no/such-image" "$T/lcd.log")" -eq 1 ]
	"$LCCTL" sandbox create >/dev/null
	run api POST /sandboxes '{"image": "no/such-image"}'
	[ "${lines[1]}" = 404 ]
}

@test "sandbox pool: a task's sandboxes come from the pool and count against sandboxes.max; the members do not" {
	[ -e /dev/loop-control ] && command -v mkfs.ext4 >/dev/null || skip "needs loop devices and mkfs.ext4"
	# a task's sandbox has a disk (task_disk): the members have that one
	pool_config host 3 64M
	start_lcd
	"$LCCTL" deploy "$FIXTURES/sbapp-other.json" >/dev/null # sbb: sandboxes.max 2
	wait_pool 3
	args=$(jq -cn --rawfile s "$FIXTURES/sbtask.py" '{mode: "quota", n: 3, script: $s}')
	run "$LCCTL" run --json sbb:py "$args"
	[ "$status" -eq 0 ]
	r=$(echo "$output" | jq .result)
	echo "$r" | jq -e '.codes == [201, 201, 429] and (.made | length) == 2 and .fork == 429 and .listed == 2'
	for s in $(echo "$r" | jq -r '.made[]'); do
		grep -q "sandbox $s created for task .* (image host, from the pool)" "$T/lcd.log"
		run "$LCRUN" inspect "$s"
		[ "$status" -eq 120 ] # the task's end took them
	done
	wait_pool 3
	[ "$("$LCCTL" sandbox ls --json | jq length)" -eq 0 ]
	# the operator's create asks for no disk: not one of these members
	s=$("$LCCTL" sandbox create)
	grep -q "sandbox $s created for the operator (image host)$" "$T/lcd.log"
	[ "$("$LCCTL" sandbox show "$s" | jq .limits.disk)" = 0 ]
	[ "$(members | wc -l)" -eq 3 ]
}

@test "sandbox pool: lcd's stop removes the pool; after kill -9 the next start removes what was left; nothing stays on the host" {
	pool_config host 2
	start_lcd
	wait_pool 2
	kept=$("$LCCTL" sandbox create --name kept) # an operator's sandbox outlives lcd, as without a pool
	wait_pool 2
	cgs=$(for s in $(members); do "$LCRUN" inspect "$s" | jq -r .cgroup; done)
	[ "$(echo "$cgs" | grep -c /lcrun/)" -eq 2 ]
	stop_lcd
	grep -q "sandbox pool: removed its 2 sandbox(es)" "$T/lcd.log"
	[ "$("$LCRUN" ps --json | jq -r '.[].id')" = "$kept" ]
	for cg in $cgs; do [ ! -d "$cg" ]; done
	[ -z "$(ls "$LCRUN_ROOT/lcd/pool")" ]
	[ -z "$(grep " $LCRUN_ROOT" /proc/self/mountinfo)" ]
	# kill -9: the members outlive lcd; the next start removes them
	start_lcd
	wait_pool 2
	second=$(members)
	kill -9 "$LCD_PID"; wait "$LCD_PID" 2>/dev/null || true
	LCD_PID=
	for s in $second; do "$LCRUN" inspect "$s" | jq -e '.status == "running"'; done
	start_lcd
	grep -q "sandbox pool: removed 2 sandbox(es) an earlier lcd left in its pool" "$T/lcd.log"
	for s in $second; do
		run "$LCRUN" inspect "$s"
		[ "$status" -eq 120 ]
	done
	wait_pool 2
	"$LCCTL" sandbox show kept | jq -e '.state == "running"'
	[ "$("$LCCTL" sandbox ls --json | jq length)" -eq 1 ]
	stop_lcd
	[ "$("$LCRUN" ps --json | jq -r '.[].id')" = "$kept" ]
	"$LCRUN" rm -f "$kept" >/dev/null
	"$LCRUN" gc >/dev/null
	[ "$("$LCRUN" ps --json | jq length)" -eq 0 ]
	[ -z "$(find "$LCRUN_STATE_DIR" -mindepth 1 -maxdepth 1 -name '[0-9a-f]*')" ]
}

@test "sandbox pool: a stored image's pool: its members have the image's files and take the request's env" {
	start_lcd
	src=$("$LCCTL" sandbox create -e BASE=1)
	"$LCCTL" sandbox exec "$src" -- sh -c 'echo from-the-image > /root/base'
	"$LCCTL" sandbox snapshot "$src" pool/base >/dev/null
	"$LCCTL" sandbox rm "$src"
	stop_lcd
	pool_config pool/base 1
	start_lcd
	wait_pool 1
	s=$("$LCCTL" sandbox create --image pool/base -e MORE=2)
	grep -q "sandbox $s created for the operator (image pool/base, from the pool)" "$T/lcd.log"
	[ "$("$LCCTL" sandbox exec "$s" -- cat /root/base)" = from-the-image ]
	[ "$("$LCCTL" sandbox exec "$s" -- sh -c 'echo $MORE')" = 2 ]
	"$LCCTL" sandbox show "$s" | jq -e '.image == "pool/base"'
	# a host create does not take a pool/base member
	wait_pool 1
	h=$("$LCCTL" sandbox create)
	grep -q "sandbox $h created for the operator (image host)$" "$T/lcd.log"
	# A new version of the image: the next create is made fresh from it,
	# and the filler replaces the member of the old version.
	wait_pool 1
	old=$(members)
	"$LCCTL" sandbox exec "$s" -- sh -c 'echo version-2 > /root/base'
	"$LCCTL" sandbox snapshot "$s" pool/v2 >/dev/null
	"$LCRUN" image rm pool/base
	"$LCRUN" image tag pool/v2 pool/base
	v2=$("$LCCTL" sandbox create --image pool/base)
	if grep -q "sandbox $v2 created for the operator (image pool/base, from the pool)" "$T/lcd.log"; then false; fi
	[ "$("$LCCTL" sandbox exec "$v2" -- cat /root/base)" = version-2 ]
	for _ in $(seq 100); do grep -q "of pool/base is of an older version of the image; replacing it" "$T/lcd.log" && break; sleep 0.1; done
	grep -q "$old of pool/base is of an older version of the image; replacing it" "$T/lcd.log"
	for _ in $(seq 300); do [ "$(members | grep -vx "$old" | wc -l)" -eq 1 ] && break; sleep 0.1; done
	wait_pool 1
	[ "$(members)" != "$old" ]
	v3=$("$LCCTL" sandbox create --image pool/base)
	grep -q "sandbox $v3 created for the operator (image pool/base, from the pool)" "$T/lcd.log"
	[ "$("$LCCTL" sandbox exec "$v3" -- cat /root/base)" = version-2 ]
}
