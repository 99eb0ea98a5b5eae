#!/usr/bin/env bats
# What a task's sandbox can do to what lcd gives it: its task directory
# (/run/task) and its API socket (/run/lcd.sock, its own, bound
# read-only).  A private lcd; runs as root.

load ../integration/helpers
load ../integration/lcd-lib

setup() {
	lcd_setup
	start_lcd
	# tamper: what root in a task's sandbox may try on the socket it is
	# given; each line says how it went.  probe: a task that calls the API
	# as a user other than root in its sandbox, once tamper is through.
	# hold: a task that waits, to be looked at from the host.
	jq -n '{name: "rooms", functions: {
		tamper: {command: "for t in \"chmod 000 /run/lcd.sock\" \"chmod 0600 /run/lcd.sock\" \"touch -d 2001-01-01 /run/lcd.sock\" \"rm -f /run/lcd.sock\" \"mv /run/lcd.sock /run/x\"; do if sh -c \"$t\" 2>/dev/null; then echo \"done: $t\"; else echo \"refused: $t\"; fi; done", timeout: 60},
		probe: {command: "setpriv --reuid 1000 --regid 1000 --clear-groups python3 -c \"from lcrun_client import Client; print(Client().whoami()[\\\"app\\\"])\"", timeout: 60},
		hold: {command: "i=0; while [ ! -e /run/task/go ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; printf '"'"'{\"ok\": 1}'"'"' >/run/task/result.json", timeout: 120}
	}}' >"$T/rooms.json"
	"$LCCTL" deploy "$T/rooms.json" >/dev/null
}

teardown() {
	lcd_teardown
}

@test "a task cannot chmod, touch or remove its API socket" {
	run "$LCCTL" run rooms:tamper
	[ "$status" -eq 0 ]
	id=$("$LCCTL" task list --app rooms --json | jq -r '.[0].id')
	run "$LCCTL" task logs "$id"
	echo "$output"
	[[ "$output" == *"refused: chmod 000 /run/lcd.sock"* ]]
	[[ "$output" == *"refused: chmod 0600 /run/lcd.sock"* ]]
	[[ "$output" == *"refused: touch -d 2001-01-01 /run/lcd.sock"* ]]
	[[ "$output" == *"refused: rm -f /run/lcd.sock"* ]]
	[[ "$output" == *"refused: mv /run/lcd.sock /run/x"* ]]
	# and the next task reaches the API through its own, as a user that is
	# not root in its sandbox
	run "$LCCTL" run rooms:probe
	echo "$output"
	[ "$status" -eq 0 ]
	id=$("$LCCTL" task list --app rooms --json | jq -r 'map(select(.function == "probe"))[0].id')
	run "$LCCTL" task logs "$id"
	echo "$output"
	[[ "$output" == *rooms* ]]
}

@test "a task's directory is its own: 0700, its sandbox user's, not writable by anyone else" {
	id=$("$LCCTL" run --detach rooms:hold)
	dir=$LCRUN_ROOT/lcd/tasks/$id
	for _ in $(seq 100); do [ -d "$dir" ] && [ "$(stat -c %u "$dir")" != 0 ] && break; sleep 0.1; done
	stat -c '%a %u:%g' "$dir"
	base=$(jq -r '.uid_base // 1000000000' /etc/lcrun/lcrun.json 2>/dev/null || echo 1000000000)
	[ "$(stat -c '%a %u:%g' "$dir")" = "700 $base:$base" ]
	# nobody else may write there, whatever the directories above allow
	chmod 0711 "$LCRUN_ROOT"
	run runuser -u nobody -- sh -c "echo forged >$dir/result.json"
	chmod 0700 "$LCRUN_ROOT"
	[ "$status" -ne 0 ]
	[ ! -e "$dir/result.json" ]
	# the task itself writes its result (and reads its args) as before
	touch "$dir/go"
	for _ in $(seq 100); do
		[ "$("$LCCTL" task show "$id" | jq -r .state)" = succeeded ] && break
		sleep 0.1
	done
	[ "$("$LCCTL" task show "$id" | jq -r .state)" = succeeded ]
	[ "$("$LCCTL" task show "$id" | jq -c .result.ok)" = 1 ]
}
