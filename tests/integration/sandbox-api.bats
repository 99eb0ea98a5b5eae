#!/usr/bin/env bats
# lcd's sandbox API as its users meet it: functions that make sandboxes
# with their task's token (tests/fixtures/lcd/sbtask.py through the Python
# client bound into the task), the operator over the unix socket (curl and
# lcctl sandbox), and the Python client's own tests.  A private lcd per test
# (temp LCRUN_ROOT, LCRUN_STATE_DIR and socket), as in lcd.bats.  Needs root.

FIXTURES="$BATS_TEST_DIRNAME/../fixtures/lcd"
SRC="$BATS_TEST_DIRNAME/../.."

load lcd-lib

setup() {
	lcd_setup
	command -v /usr/bin/python3 >/dev/null || skip "needs /usr/bin/python3"
	# The runtime's files on the disk of /var/lib/lcrun: in the VM suite that
	# is ext4, which its 6.1 kernel can idmap (not the /tmp tmpfs), so that a
	# snapshot's files are root's again in its forks.
	mkdir -p /var/lib/lcrun/tests
	R=$(mktemp -d /var/lib/lcrun/tests/sbapi-bats.XXXXXX)
	export LCRUN_ROOT="$R/root"
	LCRUN="${LCRUN:-$BIN/lcrun}"
	SECRET="sb-s3cr3t-$RANDOM-$RANDOM-value"
	start_lcd
	"$LCCTL" deploy "$FIXTURES/sbapp.json" >/dev/null
	"$LCCTL" deploy "$FIXTURES/sbapp-other.json" >/dev/null
	echo "$SECRET" | "$LCCTL" secret set SB_SECRET
	echo "other-$RANDOM" | "$LCCTL" secret set OTHER_SECRET
}

teardown() {
	local rc=0
	stop_lcd
	[ -n "${NS:-}" ] && ip netns del "$NS" 2>/dev/null
	# operator sandboxes outlive lcd by design: remove what a test left
	if [ -n "${T:-}" ] && [ -d "$T/state" ]; then
		lcd_leftovers_remove || rc=1
		"$LCRUN" gc >/dev/null 2>&1 || true
	fi
	lcd_teardown
	[ -n "${R:-}" ] && rm -rf "$R"
	rmdir /var/lib/lcrun/tests 2>/dev/null || true
	return $rc
}

task_socket() { echo "$LCRUN_ROOT/lcd/sockets/$1.sock"; } # a task's own API socket

task_api() { # TASK TOKEN METHOD PATH [BODY]: through TASK's socket with a task's token
	curl -s --unix-socket "$(task_socket "$1")" -H "Authorization: Bearer $2" -X "$3" "http://lcd/v1$4" \
		${5:+-H 'Content-Type: application/json' --data-binary "$5"} -w '\n%{http_code}\n'
}

task_args() { # MODE [JSON]: the arguments of a sbtask.py run
	jq -cn --rawfile s "$FIXTURES/sbtask.py" --arg m "$1" --argjson x "${2:-{\}}" '$x + {mode: $m, script: $s}'
}

sandboxes() { "$LCRUN" ps --json | jq length; } # what the runtime has, whoever made it

map_wait() { # APP KEY: the value, once a task has set it
	for _ in $(seq 300); do
		v=$("$LCCTL" map get "$1/state" "$2" 2>/dev/null) && { echo "$v"; return 0; }
		sleep 0.1
	done
	echo "no $1/state $2 after 30 s" >&2
	return 1
}

@test "sandbox API: a function makes a sandbox, commits with git, moves 50 MiB both ways, snapshots, forks 4, destroys them" {
	run "$LCCTL" run --json sba:py "$(task_args workflow '{"image": "sba/repo-base"}')"
	[ "$status" -eq 0 ] || { echo "$output" >&2; "$LCCTL" task logs "$(echo "$output" | jq -r .id)" >&2; false; }
	r=$(echo "$output" | jq .result)
	echo "$r" | jq -e '.whoami.kind == "task" and .whoami.app == "sba" and .whoami.function == "py"'
	# git in the sandbox
	commit=$(echo "$r" | jq -r .commit)
	[[ "$commit" =~ ^[0-9a-f]{40}$ ]]
	# 50 MiB byte for byte: what was sent, what the sandbox holds, what came back
	echo "$r" | jq -e '.sha_sent == .sha_in_sandbox and .sha_sent == .sha_back and .size_back == 52428800'
	# a snapshot any later create can name
	echo "$r" | jq -e '.snapshot.image == "sba/repo-base" and (.snapshot.digest | startswith("sha256:"))'
	"$LCRUN" image ls --json | jq -e '.[] | select(.name == "sba/repo-base")'
	# 4 forks, each its own sandbox with the repository
	[ "$(echo "$r" | jq '.forks | length')" -eq 4 ]
	[ "$(echo "$r" | jq '[.forks[].id] | unique | length')" -eq 4 ]
	for i in 0 1 2 3; do
		out=$(echo "$r" | jq -r ".forks[$i].stdout")
		[[ "$out" == "$commit"*"hello from the task"*"fork-$i"* ]]
	done
	# the task saw exactly its 5 sandboxes, and none after destroying them
	[ "$(echo "$r" | jq '.listed | length')" -eq 5 ]
	echo "$r" | jq -e '.destroyed == true and .after == []'
	[ "$(sandboxes)" -eq 0 ]
	[ "$("$LCCTL" sandbox ls --json | jq length)" -eq 0 ]
	# the snapshot serves a new sandbox
	id=$("$LCCTL" sandbox create --image sba/repo-base)
	run "$LCCTL" sandbox exec "$id" -- git -C /work/repo log --format=%H -1
	[ "$status" -eq 0 ]
	[ "$output" = "$commit" ]
	"$LCCTL" sandbox rm "$id"
	[ "$(sandboxes)" -eq 0 ]
}

@test "sandbox API: a cancelled task and a timed-out task leave no sandbox; their token dies with them" {
	t=$("$LCCTL" run --detach sba:py "$(task_args hold)")
	sb=$(map_wait sba sandbox)
	token=$(map_wait sba token)
	"$LCCTL" sandbox show "$sb" | jq -e --arg t "$t" '.state == "running" and .owner.kind == "task" and .owner.task == $t'
	# the token works while the task runs, on the task's own socket
	run task_api "$t" "$token" GET "/sandboxes/$sb"
	[ "${lines[1]}" = 200 ]
	# cancelled with the Python client: True, then False once it has ended
	cancel() { PYTHONPATH="$SRC/contrib/python" PYTHONDONTWRITEBYTECODE=1 python3 -c \
		'import sys; from lcrun_client import Client; print(Client().cancel(sys.argv[1]))' "$1"; }
	[ "$(cancel "$t")" = True ]
	wait_state "$t" cancelled
	[ "$(cancel "$t")" = False ]
	# gone when the task is over: not in lcd, not in the runtime
	run "$LCCTL" sandbox show "$sb"
	[ "$status" -eq 120 ]
	run "$LCRUN" inspect "$sb"
	[ "$status" -eq 120 ]
	[ "$(sandboxes)" -eq 0 ]
	# its socket and its token are gone
	[ ! -e "$(task_socket "$t")" ]
	[ "$(lcd_sql "select count(*) from tokens where task_id = '$t'")" -eq 0 ]
	"$LCCTL" map del sba/state sandbox

	# a task that times out (short: 4 s) while holding a sandbox
	t=$("$LCCTL" run --detach sba:short "$(task_args hold)")
	sb=$(map_wait sba sandbox)
	wait_state "$t" timed-out
	run "$LCRUN" inspect "$sb"
	[ "$status" -eq 120 ]
	[ "$(sandboxes)" -eq 0 ]
	grep -q "task $t ended: its sandbox $sb removed" "$T/lcd.log"
}

@test "sandbox API: kill -9 lcd while a task holds a sandbox: gone after the restart" {
	t=$("$LCCTL" run --detach sba:py "$(task_args hold)")
	sb=$(map_wait sba sandbox)
	token=$(map_wait sba token)
	kill -9 "$LCD_PID"; wait "$LCD_PID" 2>/dev/null || true
	LCD_PID=
	# the sandbox outlives lcd (its monitor is its own) ...
	"$LCRUN" inspect "$sb" | jq -e '.status == "running"'
	start_lcd
	# ... and the restart removes it: its task is not running any more
	run "$LCRUN" inspect "$sb"
	[ "$status" -eq 120 ]
	# (the task's own sandbox, killed at the restart, is the runtime gc's to collect)
	[ "$("$LCRUN" ps --json | jq '[.[] | select(.state == "running")] | length')" -eq 0 ]
	"$LCCTL" task show "$t" | jq -e '.state == "failed" and (.error | test("lcd restarted"))'
	grep -q "sandbox $sb removed at start (its task is not running)" "$T/lcd.log"
	[ ! -e "$(task_socket "$t")" ]
	[ "$(lcd_sql 'select count(*) from tokens')" -eq 0 ]
}

@test "sandbox API: app A's token gets 403/404 on app B's sandboxes, maps and the operator's verbs" {
	ta=$("$LCCTL" run --detach sba:py "$(task_args hold)")
	sb=$(map_wait sba sandbox)
	run "$LCCTL" run --json sbb:py "$(task_args probe "$(jq -cn --arg s "$sb" --arg t "$ta" '{other_app: "sba", sandbox: $s, task: $t}')")"
	[ "$status" -eq 0 ]
	r=$(echo "$output" | jq .result)
	echo "$r" | jq -c . >&2
	# another app's sandbox is unknown to it, whatever it tries
	echo "$r" | jq -e '.get == 404 and .exec == 404 and .files == 404 and .delete == 404 and .snapshot == 404'
	echo "$r" | jq -e '.listed == []'
	# another app's maps, functions and tasks: refused or unknown
	echo "$r" | jq -e '.map_get == 403 and .map_set == 403 and .spawn_other == 403 and .task_other == 404'
	echo "$r" | jq -e '.own_map == 200'
	# never secrets, deploy, delete, schedules; no host binds; no token, no access
	echo "$r" | jq -e '.secrets == 403 and .apps == 403 and .deploy == 403 and .delete_app == 403 and .schedules == 403'
	echo "$r" | jq -e '.mounts == 403 and .no_token == 401 and .bad_token == 401'
	# nothing of A's changed
	"$LCCTL" sandbox show "$sb" | jq -e '.state == "running"'
	[ "$("$LCCTL" map get sba/state sandbox)" = "$sb" ]
	[ "$("$LCCTL" map get sbb/state probe)" = ok ]
	run "$LCCTL" app list --json
	[ "$(echo "$output" | jq length)" -eq 2 ]
	# the operator sees A's sandbox, owned by A's task
	"$LCCTL" sandbox ls --json | jq -e --arg t "$ta" '.[] | select(.owner.app == "sba" and .owner.task == $t)'
	"$LCCTL" task cancel "$ta"
	wait_state "$ta" cancelled
	[ "$(sandboxes)" -eq 0 ]
}

@test "sandbox API: the stream carries interleaved stdout and stderr in order, as they happen" {
	id=$(api POST /sandboxes '{}' | head -1 | jq -r .id)
	body='{"cmd": "for i in 1 2 3; do echo out$i; sleep 0.4; echo err$i >&2; sleep 0.4; done; exit 5"}'
	curl -sN --unix-socket "$LCD_SOCKET" -X POST -H 'Content-Type: application/json' --data-binary "$body" \
		"http://lcd/v1/sandboxes/$id/exec?stream=1" |
		while IFS= read -r line; do echo "$(date +%s%N) $line"; done >"$T/stream"
	cat "$T/stream" >&2
	[ "$(cut -d' ' -f2- "$T/stream" | jq -sc '[.[] | to_entries[0] | "\(.key)=\(.value | tostring | rtrimstr("\n"))"]')" = \
		'["stdout=out1","stderr=err1","stdout=out2","stderr=err2","stdout=out3","stderr=err3","exit_code=5"]' ]
	tail -1 "$T/stream" | cut -d' ' -f2- | jq -e '.exit_code == 5 and .signal == 0 and .timed_out == false'
	# as they happen: the first line came more than 1.5 s before the last
	first=$(head -1 "$T/stream" | cut -d' ' -f1)
	last=$(tail -1 "$T/stream" | cut -d' ' -f1)
	[ $(( (last - first) / 1000000 )) -gt 1500 ]
	# lcctl sandbox exec streams the same, to its own stdout/stderr, and exits with the status
	run "$LCCTL" sandbox exec "$id" -- sh -c 'echo one; echo two >&2; exit 3'
	[ "$status" -eq 3 ]
	[ "$output" = "one
two" ]
	run "$LCCTL" sandbox exec --timeout 1 "$id" -- sleep 30
	[ "$status" -eq 124 ]
	api DELETE "/sandboxes/$id" >/dev/null
}

@test "sandbox API: a session keeps cd and exported variables; a syntax error does not end it, exit does" {
	id=$(api POST /sandboxes '{}' | head -1 | jq -r .id)
	run api POST "/sandboxes/$id/sessions" '{"env": {"START": "s0"}}'
	[ "${lines[1]}" = 201 ]
	s=$(echo "${lines[0]}" | jq -r .id)
	r=$(api POST "/sandboxes/$id/sessions/$s/run" '{"cmd": "mkdir -p /tmp/w && cd /tmp/w && export FOO=bar; BAZ=local"}' | head -1)
	echo "$r" | jq -e '.exit_code == 0 and .stdout == "" and .session_ended == false'
	r=$(api POST "/sandboxes/$id/sessions/$s/run" '{"cmd": "pwd; echo $FOO $BAZ $START; echo to-err >&2; false"}' | head -1)
	echo "$r" | jq -e '.stdout == "/tmp/w\nbar local s0\n" and .stderr == "to-err\n" and .exit_code == 1'
	# a command that reads stdin gets EOF, not the next command
	r=$(api POST "/sandboxes/$id/sessions/$s/run" '{"cmd": "cat; echo after-cat"}' | head -1)
	echo "$r" | jq -e '.stdout == "after-cat\n"'
	r=$(api POST "/sandboxes/$id/sessions/$s/run" "{\"cmd\": \"if then fi 'unclosed\"}" | head -1)
	echo "$r" | jq -e '.exit_code != 0 and .session_ended == false and (.stderr | length > 0)'
	r=$(api POST "/sandboxes/$id/sessions/$s/run" '{"cmd": "printf %s \"$PWD\""}' | head -1)
	echo "$r" | jq -e '.stdout == "/tmp/w" and .exit_code == 0'
	# two sessions are separate shells
	s2=$(api POST "/sandboxes/$id/sessions" '{"workdir": "/tmp"}' | head -1 | jq -r .id)
	r=$(api POST "/sandboxes/$id/sessions/$s2/run" '{"cmd": "pwd; echo ${FOO:-unset}"}' | head -1)
	echo "$r" | jq -e '.stdout == "/tmp\nunset\n"'
	[ "$(api GET "/sandboxes/$id/sessions" | head -1 | jq '.sessions | length')" -eq 2 ]
	# a timeout ends the session (its shell is killed)
	r=$(api POST "/sandboxes/$id/sessions/$s2/run" '{"cmd": "sleep 30", "timeout": 1}' | head -1)
	echo "$r" | jq -e '.timed_out == true and .session_ended == true'
	run api POST "/sandboxes/$id/sessions/$s2/run" '{"cmd": "true"}'
	[ "${lines[1]}" = 404 ]
	r=$(api POST "/sandboxes/$id/sessions/$s/run" '{"cmd": "exit 7"}' | head -1)
	echo "$r" | jq -e '.exit_code == 7 and .session_ended == true'
	[ "$(api GET "/sandboxes/$id/sessions" | head -1 | jq '.sessions | length')" -eq 0 ]
	# delete
	s3=$(api POST "/sandboxes/$id/sessions" '{}' | head -1 | jq -r .id)
	run api DELETE "/sandboxes/$id/sessions/$s3"
	[ "${lines[1]}" = 200 ]
	run api DELETE "/sandboxes/$id/sessions/$s3"
	[ "${lines[1]}" = 404 ]
	# the sessions' shells are gone (the only sh is the one asking), and so is
	# the sleep of the run that timed out
	comms=$("$LCRUN" exec "$id" -- sh -c 'cat /proc/[0-9]*/comm')
	[ "$(echo "$comms" | grep -cx sh)" -eq 1 ]
	if echo "$comms" | grep -qx sleep; then false; fi
	api DELETE "/sandboxes/$id" >/dev/null
}

@test "sandbox API: bad input gets one line and a distinct code, and changes nothing" {
	id=$("$LCCTL" sandbox create --label keep=1)
	before=$(sandboxes)
	# unknown image
	run "$LCCTL" sandbox create --image no/such-image
	[ "$status" -eq 120 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == "lcctl: image: "*"no/such-image"* ]]
	run api POST /sandboxes '{"image": "no/such-image"}'
	[ "${lines[1]}" = 404 ]
	# bad net: an unknown policy, a bad rule, a path
	run "$LCCTL" sandbox create --net no-such-policy
	[ "$status" -eq 120 ]
	[[ "$output" == "lcctl: net: unknown network policy 'no-such-policy'"* ]]
	run api POST /sandboxes '{"net": {"mode": "allow", "allow": [{"cidr": "10.0.0.1/8"}]}}'
	[ "${lines[1]}" = 400 ]
	[[ "${lines[0]}" == *'"error":"net: network policy'*'allow[0]'* ]]
	run api POST /sandboxes '{"net": "/etc/passwd"}'
	[ "${lines[1]}" = 400 ]
	# unknown keys, malformed JSON, wrong types
	run api POST /sandboxes '{"imaeg": "host"}'
	[ "${lines[1]}" = 400 ]
	[[ "${lines[0]}" == *'imaeg: unknown key'* ]]
	run api POST /sandboxes '{"image": '
	[ "${lines[1]}" = 400 ]
	[[ "${lines[0]}" == *'malformed JSON'* ]]
	run api POST /sandboxes '{"ttl": -1}'
	[ "${lines[1]}" = 400 ]
	run api POST /sandboxes '{"user": "root"}'
	[ "${lines[1]}" = 400 ]
	run api POST /sandboxes '{"secrets": ["NO_SUCH_SECRET"]}'
	[ "${lines[1]}" = 404 ]
	run api POST "/sandboxes/$id/exec" '{"argv": ["true"], "cmd": "true"}'
	[ "${lines[1]}" = 400 ]
	run api POST "/sandboxes/$id/exec" '{"cmd": "true", "stdin": "***"}'
	[ "${lines[1]}" = 400 ]
	[ "$(sandboxes)" -eq "$before" ]
	[ "$("$LCCTL" sandbox ls --json | jq length)" -eq 1 ]
	# path traversal in files: refused before anything is opened
	for p in /tmp/../etc/evil relative/path /tmp/.. ''; do
		run curl -s --unix-socket "$LCD_SOCKET" -X PUT --data-binary x -w '\n%{http_code}\n' \
			"http://lcd/v1/sandboxes/$id/files?path=$p"
		[ "${lines[1]}" = 400 ]
		[[ "${lines[0]}" == *"expected an absolute path without '..'"* || "${lines[0]}" == *"?path="* ]]
		run curl -s --unix-socket "$LCD_SOCKET" -w '\n%{http_code}\n' "http://lcd/v1/sandboxes/$id/files?path=$p"
		[ "${lines[1]}" = 400 ]
	done
	run "$LCCTL" sandbox exec "$id" -- test -e /etc/evil
	[ "$status" -eq 1 ]
	# a name with a space and an accent, and one that is not UTF-8: as
	# they are, both ways
	for enc in '%C3%A9t%C3%A9%20x' '%FF%FEraw'; do
		run curl -s --unix-socket "$LCD_SOCKET" -X PUT --data-binary "body-$enc" -w '\n%{http_code}\n' \
			"http://lcd/v1/sandboxes/$id/files?path=/tmp/$enc"
		[ "${lines[1]}" = 200 ]
		[ "$(curl -s --unix-socket "$LCD_SOCKET" "http://lcd/v1/sandboxes/$id/files?path=/tmp/$enc")" = "body-$enc" ]
	done
	"$LCCTL" sandbox exec "$id" -- test -f "/tmp/été x"
	"$LCCTL" sandbox exec "$id" -- sh -c 'test -f "$(printf "/tmp/\377\376raw")"'
	# the answers name such a path with its other bytes as \xNN
	r=$(curl -s --unix-socket "$LCD_SOCKET" -X PUT --data-binary x "http://lcd/v1/sandboxes/$id/files?path=/tmp/%FFa")
	[ "$(echo "$r" | jq -r .path)" = '/tmp/\xffa' ]
	run api GET "/sandboxes/$id/files?path=/no/%FFa"
	[ "${lines[1]}" = 404 ]
	[[ "$(echo "${lines[0]}" | jq -r .error)" == *'/no/\xffa'* ]]
	# a missing file, a missing parent, a directory without tar=1
	run api GET "/sandboxes/$id/files?path=/no/such/file"
	[ "${lines[1]}" = 404 ]
	run curl -s --unix-socket "$LCD_SOCKET" -X PUT --data-binary x -w '\n%{http_code}\n' \
		"http://lcd/v1/sandboxes/$id/files?path=/no/such/dir/file"
	[ "${lines[1]}" = 404 ]
	run api GET "/sandboxes/$id/files?path=/etc"
	[ "${lines[1]}" = 400 ]
	[[ "${lines[0]}" == *"is a directory"*"tar=1"* ]]
	# oversized exec output: capped at max_output, marked truncated, lcd unharmed
	r=$(api POST "/sandboxes/$id/exec" '{"cmd": "head -c 5000000 /dev/zero | tr \\\\0 x; echo done >&2", "max_output": 1000}' | head -1)
	echo "$r" | jq -e '.truncated == true and (.stdout | length) == 1000 and .stderr == "done\n" and .exit_code == 0'
	r=$(api POST "/sandboxes/$id/exec" '{"cmd": "head -c 3000000 /dev/zero"}' | head -1)
	echo "$r" | jq -e '.truncated == true and (.stdout | length) == 1048576'
	# unknown sandbox, unknown endpoint, wrong state
	run "$LCCTL" sandbox exec 000000000000 -- true
	[ "$status" -eq 120 ]
	[ "$output" = "lcctl: no sandbox '000000000000'" ]
	run api POST "/sandboxes/$id/frobnicate" '{}'
	[ "${lines[1]}" = 404 ]
	"$LCCTL" sandbox pause "$id"
	run "$LCCTL" sandbox exec "$id" -- true
	[ "$status" -eq 117 ]
	[[ "$output" == *"is paused"* ]]
	run "$LCCTL" sandbox pause "$id"
	[ "$status" -eq 117 ]
	"$LCCTL" sandbox resume "$id"
	# a name taken; a snapshot name taken
	"$LCCTL" sandbox create --name twin >/dev/null
	run "$LCCTL" sandbox create --name twin
	[ "$status" -eq 119 ]
	run api POST /sandboxes '{"name": "twin"}'
	[ "${lines[1]}" = 409 ]
	"$LCCTL" sandbox snapshot "$id" img/one >/dev/null
	run "$LCCTL" sandbox snapshot "$id" img/one
	[ "$status" -eq 119 ]
	run "$LCCTL" sandbox snapshot "$id" 'bad name'
	[ "$status" -eq 121 ]
	run "$LCCTL" sandbox fork "$id" 1000
	[ "$status" -eq 121 ]
	# usage
	run "$LCCTL" sandbox frob
	[ "$status" -eq 123 ]
	run "$LCCTL" sandbox create --frob
	[ "$status" -eq 123 ]
	[ "${#lines[@]}" -eq 1 ]
	run "$LCCTL" sandbox cp /etc/hostname /tmp/x
	[ "$status" -eq 123 ]
	# nothing was made by any of it
	[ "$(sandboxes)" -eq $((before + 1)) ]
	[ "$("$LCCTL" sandbox ls --json | jq length)" -eq 2 ]
	"$LCCTL" sandbox show "$id" | jq -e '.state == "running" and .labels.keep == "1"'
}

@test "sandbox API: sandboxes.max refuses a task's create beyond it with 429, all or nothing for fork" {
	run "$LCCTL" run --json sbb:py "$(task_args quota '{"n": 3}')"
	[ "$status" -eq 0 ]
	r=$(echo "$output" | jq .result)
	echo "$r" | jq -e '.codes == [201, 201, 429] and (.made | length) == 2 and .fork == 429 and .listed == 2'
	echo "$r" | jq -e '.refusal | test("app sbb holds 2 sandbox\\(es\\); 1 more would exceed sandboxes.max 2")'
	[ "$(sandboxes)" -eq 0 ] # and the task's end took the two it had
	[ "$("$LCRUN" image ls --json | jq length)" -eq 0 ] # the refused fork's snapshot went too
	# the manifest is checked
	jq '.sandboxes.max = -1' "$FIXTURES/sbapp-other.json" >"$T/bad.json"
	run "$LCCTL" deploy "$T/bad.json"
	[ "$status" -eq 121 ]
	[ "$output" = "lcctl: sandboxes.max: expected a non-negative integer" ]
	jq '.sandboxes.maximum = 1' "$FIXTURES/sbapp-other.json" >"$T/bad.json"
	run "$LCCTL" deploy "$T/bad.json"
	[ "$output" = "lcctl: sandboxes.maximum: unknown key" ]
}

@test "sandbox API: secrets reach exec and sessions only: never state.json, GET answers, logs or snapshots" {
	t=$("$LCCTL" run --detach sba:py "$(task_args secrets)")
	sb=$(map_wait sba sandbox)
	# while it is alive: not in its state, not in lcd's answers or logs, not in lcd.db's sandbox row
	if grep -rq "$SECRET" "$LCRUN_STATE_DIR"; then false; fi
	if "$LCCTL" sandbox show "$sb" | grep -q "$SECRET"; then false; fi
	"$LCCTL" sandbox show "$sb" | jq -e '.secrets == ["SB_SECRET"]'
	if grep -q "$SECRET" "$T/lcd.log"; then false; fi
	if lcd_sql_dump sandboxes | grep -q "$SECRET"; then false; fi
	# a snapshot of it does not carry the environment (only what the sandbox wrote itself)
	"$LCCTL" sandbox exec "$sb" -- rm /tmp/env-dump
	"$LCCTL" sandbox snapshot "$sb" sec/snap >/dev/null
	if grep -rq "$SECRET" "$LCRUN_ROOT/images"; then false; fi
	"$LCCTL" map set sba/state done 1
	wait_state "$t" succeeded
	r=$("$LCCTL" task show "$t" | jq .result)
	echo "$r" | jq -c . >&2
	# the command and the session saw it (it is in the task's result only because the test put it there)
	[ "$(echo "$r" | jq -r .seen)" = "$SECRET" ]
	[ "$(echo "$r" | jq -r .session_seen)" = "$SECRET" ]
	echo "$r" | jq -e '.view.secrets == ["SB_SECRET"]'
	# not declared by the function: refused; not set: unknown
	# a task may name only what its function declares (whether it exists or not)
	echo "$r" | jq -e '.undeclared == 403 and .unknown == 403'
	[ "$(sandboxes)" -eq 0 ]
	# the operator may give any secret that exists
	id=$(api POST /sandboxes '{"secrets": ["OTHER_SECRET"]}' | head -1 | jq -r .id)
	run "$LCCTL" sandbox exec "$id" -- sh -c 'test -n "$OTHER_SECRET"'
	[ "$status" -eq 0 ]
	"$LCCTL" sandbox rm "$id"
}

@test "sandbox API: lcctl sandbox create, ls, show, exec, cp, snapshot, fork, stop, start, rm" {
	id=$("$LCCTL" sandbox create --label team=a --label kind=dev -e GREETING=hello -w /tmp --name devbox)
	[[ "$id" =~ ^[0-9a-f]{12}$ ]]
	id2=$("$LCCTL" sandbox create --label team=b)
	run "$LCCTL" sandbox ls
	[[ "${lines[0]}" == ID*NAME*IMAGE*STATE*OWNER* ]]
	[[ "$output" == *"$id devbox"*"host"*"running"*"operator"* ]]
	[ "$("$LCCTL" sandbox ls --label team=a --json | jq -r '.[].id')" = "$id" ]
	[ "$("$LCCTL" sandbox ls --label kind --json | jq -r '.[].id')" = "$id" ]
	[ "$("$LCCTL" sandbox ls --state running --json | jq length)" -eq 2 ]
	"$LCCTL" sandbox show devbox | jq -e --arg id "$id" '.id == $id and .labels.team == "a" and .workdir == "/tmp"'
	run "$LCCTL" sandbox exec devbox -- sh -c 'echo "$GREETING from $(pwd)"'
	[ "$output" = "hello from /tmp" ]
	echo piped | "$LCCTL" sandbox exec -i "$id" -- tr a-z A-Z >"$T/piped"
	[ "$(cat "$T/piped")" = PIPED ]
	# cp: a file in and out (mode kept), a directory in and out, tar streams
	printf 'line\n' >"$T/f.txt"; chmod 0750 "$T/f.txt"
	"$LCCTL" sandbox cp "$T/f.txt" "$id:/tmp/f.txt"
	[ "$("$LCCTL" sandbox exec "$id" -- stat -c '%a %u' /tmp/f.txt)" = "750 0" ]
	"$LCCTL" sandbox cp "$T/f.txt" "$id:/tmp/"
	mkdir -p "$T/tree/sub" && echo deep >"$T/tree/sub/x"
	"$LCCTL" sandbox exec "$id" -- mkdir /work # /tmp is a tmpfs: snapshots do not hold it
	"$LCCTL" sandbox cp "$T/tree" "$id:/work"
	[ "$("$LCCTL" sandbox exec "$id" -- cat /work/tree/sub/x)" = deep ]
	mkdir "$T/out"
	"$LCCTL" sandbox cp "$id:/work/tree" "$T/out"
	[ "$(cat "$T/out/tree/sub/x")" = deep ]
	"$LCCTL" sandbox cp "$id:/tmp/f.txt" "$T/out/g.txt"
	cmp "$T/f.txt" "$T/out/g.txt"
	"$LCCTL" sandbox cp "$id:/work/tree" - | tar -t | grep -qx 'tree/sub/x'
	tar -C "$T" -c tree | "$LCCTL" sandbox cp - "$id2:/tmp"
	[ "$("$LCCTL" sandbox exec "$id2" -- cat /tmp/tree/sub/x)" = deep ]
	# snapshot and fork
	run "$LCCTL" sandbox snapshot "$id" dev/snap
	[[ "$output" == "dev/snap sha256:"* ]]
	run "$LCCTL" sandbox fork "$id" 2
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 2 ]
	for f in "${lines[@]}"; do
		[ "$("$LCCTL" sandbox exec "$f" -- cat /work/tree/sub/x)" = deep ]
		"$LCCTL" sandbox show "$f" | jq -e '.labels.team == "a" and .workdir == "/tmp"' # the same settings
		"$LCCTL" sandbox rm "$f"
	done
	# stop keeps the files, start brings it back
	"$LCCTL" sandbox stop "$id"
	"$LCCTL" sandbox show "$id" | jq -e '.state == "stopped"'
	run "$LCCTL" sandbox exec "$id" -- true
	[ "$status" -eq 117 ]
	"$LCCTL" sandbox start "$id"
	[ "$("$LCCTL" sandbox exec "$id" -- cat /work/tree/sub/x)" = deep ]
	"$LCCTL" sandbox rm "$id" "$id2"
	run "$LCCTL" sandbox rm "$id"
	[ "$status" -eq 120 ]
	[ "$(sandboxes)" -eq 0 ]
}

@test "sandbox API: the listing shows what lcrun ps shows, and follows changes made to the sandboxes outside lcd" {
	a=$("$LCCTL" sandbox create --label k=a)
	b=$("$LCCTL" sandbox create --label k=b)
	listed() { curl -s --unix-socket "$LCD_SOCKET" http://lcd/v1/sandboxes | jq -c --arg id "$1" '.sandboxes[] | select(.id == $id)'; }
	sleep 1.2 # state files older than a second: lcd keeps them parsed
	for _ in 1 2; do
		[ "$(listed "$a" | jq -r '[.state, .labels.k, .owner.kind, (.cpu_usec | type), (.memory_bytes | type)] | join(" ")')" = \
			"running a operator number number" ]
	done
	# the fields the runtime's listing has are the same, but for usage
	ps=$("$LCRUN" ps --json | jq -c --arg id "$a" '.[] | select(.id == $id) | [.id, .name, .state, .net, .address]')
	[ "$(listed "$a" | jq -c '[.id, .name, .state, .net, .address]')" = "$ps" ]
	# changed by lcrun, not lcd: the new state shows at once
	"$LCRUN" pause "$a"
	[ "$(listed "$a" | jq -r .state)" = paused ]
	"$LCRUN" resume "$a"
	sleep 1.2
	[ "$(listed "$a" | jq -r .state)" = running ]
	"$LCRUN" stop "$a"
	[ "$(listed "$a" | jq -r '[.state, .cpu_usec, .memory_bytes] | map(tostring) | join(" ")')" = "stopped null null" ]
	# pid 1 killed: not running, whatever its state file says
	kill -9 "$("$LCRUN" inspect "$b" | jq -r .pid)"
	for _ in $(seq 50); do [ "$(listed "$b" | jq -r .state)" != running ] && break; sleep 0.1; done
	[ "$(listed "$b" | jq -r .state)" != running ]
	# removed outside lcd: gone from the listing
	"$LCRUN" rm -f "$b"
	[ -z "$(listed "$b")" ]
	"$LCCTL" sandbox rm "$a"
	[ "$(sandboxes)" -eq 0 ]
}

@test "sandbox API: operator sandboxes: ttl removes, idle_timeout stops, mounts bind host paths, files belong to the user" {
	a=$(api POST /sandboxes '{"ttl": 2}' | head -1 | jq -r .id)
	b=$(api POST /sandboxes '{"idle_timeout": 2}' | head -1 | jq -r .id)
	mkdir -p "$T/share" && echo from-host >"$T/share/h.txt"
	m=$(api POST /sandboxes "$(jq -cn --arg s "$T/share" '{mounts: [{source: $s, target: "/mnt/share", readonly: true}], user: "1000:1000"}')" | head -1 | jq -r .id)
	[ "$("$LCCTL" sandbox exec "$m" -- cat /mnt/share/h.txt)" = from-host ]
	run "$LCCTL" sandbox exec "$m" -- sh -c 'echo x > /mnt/share/h.txt'
	[ "$status" -ne 0 ]
	[ "$(cat "$T/share/h.txt")" = from-host ]
	# uploads belong to the sandbox's user (1000), with the mode asked for
	curl -sf --unix-socket "$LCD_SOCKET" -X PUT --data-binary 'echo run' "http://lcd/v1/sandboxes/$m/files?path=/tmp/s.sh&mode=0755" >/dev/null
	[ "$("$LCCTL" sandbox exec "$m" -- stat -c '%a %u:%g' /tmp/s.sh)" = "755 1000:1000" ]
	[ "$("$LCCTL" sandbox exec "$m" -- id -u)" = 1000 ]
	# both fire after 2 s; a loaded machine gets up to 20 s
	for _ in $(seq 200); do
		! "$LCCTL" sandbox show "$a" >/dev/null 2>&1 &&
			"$LCCTL" sandbox show "$b" | jq -e '.state == "stopped"' >/dev/null && break
		sleep 0.1
	done
	run "$LCCTL" sandbox show "$a"
	[ "$status" -eq 120 ]
	"$LCCTL" sandbox show "$b" | jq -e '.state == "stopped" and .stop_reason == "idle timeout"'
	"$LCCTL" sandbox rm "$b" "$m"
	[ "$(sandboxes)" -eq 0 ]
}

@test "sandbox API: a read-write mount is idmapped as --bind is: the tree's owner is the sandbox's user, its files stay the owner's" {
	mkdir -p "$T/co"
	chown 1000:1000 "$T/co"
	for im in '"auto"' true; do
		id=$(api POST /sandboxes "$(jq -cn --arg s "$T/co" --argjson im "$im" '{mounts: [{source: $s, target: "/src", idmap: $im}]}')" | head -1 | jq -r .id)
		[ "$("$LCCTL" sandbox exec "$id" -- sh -c 'touch /src/f; stat -c %u:%g /src /src/f' | sort -u)" = 0:0 ]
		[ "$(stat -c %u:%g "$T/co/f")" = 1000:1000 ]
		"$LCCTL" sandbox rm "$id"
		rm -f "$T/co/f"
	done
	# idmap false: the old way, the tree is nobody's inside and root may not write
	id=$(api POST /sandboxes "$(jq -cn --arg s "$T/co" '{mounts: [{source: $s, target: "/src", idmap: false}]}')" | head -1 | jq -r .id)
	run "$LCCTL" sandbox exec "$id" -- sh -c 'stat -c %u /src; touch /src/f'
	[ "${lines[0]}" = 65534 ]
	[ "$status" -ne 0 ]
	"$LCCTL" sandbox rm "$id"
	run api POST /sandboxes "$(jq -cn --arg s "$T/co" '{mounts: [{source: $s, target: "/src", idmap: "yes"}]}')"
	[ "${lines[1]}" = 400 ]
	[[ "${lines[0]}" == *'mounts[0]: idmap: expected true, false or \"auto\"'* ]]
	[ "$(sandboxes)" -eq 0 ]
}

in_vm_skip() { # the client and its packaging do not depend on the kernel: the host run covers them
	[ "${LCRUN_IN_VM:-0}" != 1 ] || skip "client-side only: run on the host, not again in the VM suite"
}

@test "sandbox API: the Python client's own tests, over the unix socket and over TCP with the bearer token" {
	in_vm_skip
	PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$SRC/contrib/python" run /usr/bin/python3 -m unittest discover -s "$SRC/contrib/python/tests" -v
	echo "$output" >&2
	[ "$status" -eq 0 ]
	[[ "$output" == *"OK"* ]]
	# TCP: in a network namespace of this test's own, nothing leaves it
	stop_lcd
	start_lcd_tcp "sbapi$$" 7071
	LCD_URL=http://127.0.0.1:7071 LCD_TOKEN="$(cat "$T/token")" PYTHONPATH="$SRC/contrib/python" PYTHONDONTWRITEBYTECODE=1 \
		run ip netns exec "$NS" /usr/bin/python3 -m unittest discover -s "$SRC/contrib/python/tests" -k tcp -k basic -v
	echo "$output" >&2
	[ "$status" -eq 0 ]
	[[ "$output" == *"OK"* ]]
	[[ "$output" != *"skipped"* ]]
	[ "$(sandboxes)" -eq 0 ]
}

@test "sandbox API: pip installs the Python client from the checkout; tasks import it from PYTHONPATH" {
	in_vm_skip
	/usr/bin/python3 -m venv "$T/venv" || skip "python3 -m venv is not available"
	cp -r "$SRC/contrib/python" "$T/pysrc" # setup.py builds in its own tree: not the checkout's
	run "$T/venv/bin/pip" install --no-index "$T/pysrc"
	echo "$output" >&2
	[ "$status" -eq 0 ]
	cd "$T"
	rm -rf "$T/pysrc"
	VENV="$T/venv" run "$T/venv/bin/python" -c 'import lcrun_client, os; print(lcrun_client.__file__.startswith(os.environ["VENV"]), lcrun_client.Client().whoami()["kind"])'
	[ "$output" = "True operator" ]
	# in a task: PYTHONPATH names the client bound read-only at /run/lcd/python
	run "$LCCTL" run --json sbb:py "$(task_args noop)"
	[ "$status" -eq 0 ]
	echo "$output" | jq -e '.result.whoami == {kind: "task", task: .id, app: "sbb", function: "py"}'
}

@test "sandbox API: a sandbox's monitor and processes hold no copy of lcd's memory: no secret of lcd's in them" {
	id=$("$LCCTL" sandbox create)
	mon=$("$LCRUN" inspect "$id" | jq -r .monitor_pid)
	[ "$mon" -gt 1 ]
	held=$(procs_holding "$SECRET" "$LCD_PID" "$mon")
	echo "$held"
	# the search finds it where it is; lcd itself may hold it (what a fork
	# of lcd would copy), no other process of its
	probe_works "$SECRET"
	if echo "$held" | grep '^held ' | grep -vq "^held $LCD_PID lcd$"; then false; fi
	if echo "$held" | grep -q '^unreadable '; then false; fi
	for p in lcd-runner lcrun-monitor lcrun-init; do echo "$held" | grep -q "^clean [0-9]* $p$"; done
	"$LCCTL" sandbox exec "$id" -- /bin/true
	"$LCCTL" sandbox rm "$id"
}

@test "sandbox API: a file copy in progress is made by a process that holds no copy of lcd's memory" {
	id=$("$LCCTL" sandbox create)
	pid1=$("$LCRUN" inspect "$id" | jq -r .pid)
	userns=$(readlink "/proc/$pid1/ns/user")
	# an upload whose tar stream stays open: its first block sent, the rest
	# held back by this test
	mkdir "$T/tree" && echo payload >"$T/tree/f"
	mkfifo "$T/up.fifo"
	curl -sS --unix-socket "$LCD_SOCKET" -X PUT -T - -w '\n%{http_code}\n' \
		"http://lcd/v1/sandboxes/$id/files?path=/tmp&tar=1" <"$T/up.fifo" >"$T/up.out" &
	curl_pid=$!
	exec 8>"$T/up.fifo"
	tar -C "$T" -c tree >"$T/tree.tar"
	head -c 512 "$T/tree.tar" >&8
	# the process that joined the sandbox for the copy: lcd's descendant,
	# in the sandbox's user namespace
	sid=$(ps -o sid= -p "$LCD_PID" | tr -d ' ')
	tars() { pgrep -s "$sid" -x lcd-tar; } # lcd's own
	joined=
	for _ in $(seq 100); do
		for p in $(tars) $(pgrep -P "$LCD_PID"); do
			for q in "$p" $(pgrep -P "$p"); do
				[ "$(readlink "/proc/$q/ns/user" 2>/dev/null)" = "$userns" ] && joined=$q
			done
		done
		[ -n "$joined" ] && break
		sleep 0.05
	done
	[ -n "$joined" ]
	held=$(procs_holding "$SECRET" "$LCD_PID")
	echo "$held"
	# the search finds it where it is; lcd itself may hold it (what a fork
	# of lcd would copy), no other process of its
	probe_works "$SECRET"
	if echo "$held" | grep '^held ' | grep -vq "^held $LCD_PID lcd$"; then false; fi
	if echo "$held" | grep -q '^unreadable '; then false; fi
	echo "$held" | grep -q "^clean $joined "
	# made by the runner: a child of its child
	[ "$(cat "/proc/$(ps -o ppid= -p "$(ps -o ppid= -p "$joined" | tr -d ' ')" | tr -d ' ')/comm")" = lcd-runner ]
	# the rest of the archive, up to its end (two zero blocks), but not
	# the rest of tar's last 10 KiB record: once the file is out, the
	# copy must still read what comes (a writer would find the pipe
	# closed on those last bytes, and the copy taken for a failed one)
	head -c 4096 "$T/tree.tar" | tail -c +513 >&8
	for _ in $(seq 100); do
		"$LCCTL" sandbox exec "$id" -- test -s /tmp/tree/f && break
		sleep 0.05
	done
	for _ in $(seq 100); do
		[[ ! -d "/proc/$joined" || "$(cat "/proc/$joined/wchan" 2>/dev/null)" == *pipe_read* ]] && break
		sleep 0.05
	done
	tail -c +4097 "$T/tree.tar" >&8
	exec 8>&-
	wait "$curl_pid"
	cat "$T/up.out"; [ "$(tail -1 "$T/up.out")" = 200 ]
	[ "$("$LCCTL" sandbox exec "$id" -- cat /tmp/tree/f)" = payload ]
	# and the stream's process is gone with it
	for _ in $(seq 50); do [ -d "/proc/$joined" ] || break; sleep 0.05; done
	[ ! -d "/proc/$joined" ]
	# a client that goes mid-stream: its copy is stopped, nothing stays
	curl -sS --unix-socket "$LCD_SOCKET" -X PUT -T - "http://lcd/v1/sandboxes/$id/files?path=/srv&tar=1" \
		<"$T/up.fifo" >/dev/null 2>&1 &
	curl_pid=$!
	exec 8>"$T/up.fifo"
	head -c 512 "$T/tree.tar" >&8
	for _ in $(seq 100); do [ -n "$(tars)" ] && break; sleep 0.05; done
	[ -n "$(tars)" ]
	kill -9 "$curl_pid"
	wait "$curl_pid" || true
	exec 8>&-
	for _ in $(seq 100); do [ -z "$(tars)" ] && break; sleep 0.05; done
	[ -z "$(tars)" ]
	run "$LCCTL" sandbox exec "$id" -- test -e /srv/tree/f
	[ "$status" -eq 1 ]
	# a download read only in part: the same
	n=$(curl -sS --unix-socket "$LCD_SOCKET" "http://lcd/v1/sandboxes/$id/files?path=/usr&tar=1" 2>/dev/null |
		head -c 100000 | wc -c)
	[ "$n" -eq 100000 ]
	for _ in $(seq 100); do [ -z "$(tars)" ] && break; sleep 0.05; done
	[ -z "$(tars)" ]
	"$LCCTL" sandbox rm "$id"
}

@test "sandbox API: lcd's API threads run above lcd's priority; tasks task_nice below it; sandboxes and their commands at lcd's own" {
	nice_of() { awk '{print $19}' "$1"; } # the nice field of a /proc/…/stat
	base=$(nice_of "/proc/$LCD_PID/stat")
	# the listening threads (and so the connection threads they make)
	listen=0
	for t in /proc/"$LCD_PID"/task/*; do
		[ "$(cat "$t/comm")" = MHD-listen ] || continue
		[ "$(nice_of "$t/stat")" -eq $((base - 5)) ]
		listen=$((listen + 1))
	done
	[ "$listen" -ge 1 ]
	# a task: spawned through the raised API, started by the dispatcher
	cat >"$T/nice.json" <<'JSON'
{"name": "nicety", "functions": {"show": {"command": ["/bin/sh", "-c", "cut -d' ' -f19 /proc/self/stat >/run/task/result.json"]}}}
JSON
	"$LCCTL" deploy "$T/nice.json" >/dev/null
	[ "$("$LCCTL" run nicety:show)" -eq $((base + 5)) ] # task_nice's default
	# an operator sandbox: made, exec'd into and given a session by connection threads
	id=$(api POST /sandboxes '{}' | head -1 | jq -r .id)
	r=$(api POST "/sandboxes/$id/exec" '{"cmd": "cut -d\" \" -f19 /proc/self/stat; cut -d\" \" -f19 /proc/1/stat"}' | head -1)
	[ "$(echo "$r" | jq -r .stdout)" = "$base
$base" ]
	s=$(api POST "/sandboxes/$id/sessions" '{}' | head -1 | jq -r .id)
	r=$(api POST "/sandboxes/$id/sessions/$s/run" '{"cmd": "cut -d\" \" -f19 /proc/self/stat"}' | head -1)
	[ "$(echo "$r" | jq -r .stdout)" = "$base" ]
	api DELETE "/sandboxes/$id" >/dev/null
	# one kept-alive connection (the Python client's): a create puts its
	# thread at lcd's nice and runs the sandbox there; the light requests
	# after it are served raised again
	out=$(PYTHONPATH="$SRC/contrib/python" PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 - "$LCD_PID" <<'PY'
import glob, sys
from lcrun_client import Client
def nices():  # the connection threads' nice values, while ours is open
    out = []
    for t in glob.glob(f"/proc/{sys.argv[1]}/task/*"):
        if open(f"{t}/comm").read().strip() == "MHD-connection":
            out.append(int(open(f"{t}/stat").read().rsplit(")", 1)[1].split()[16]))
    return sorted(set(out))
c = Client()
c.request("GET", "/health")  # a light request
before = nices()
with c.create_sandbox() as sb:
    pid1 = sb.run("cut -d' ' -f19 /proc/1/stat").stdout.strip()
    during = nices()
    c.request("GET", "/health")
    print(before, during, nices(), pid1)
PY
)
	echo "$out" >&2
	[ "$out" = "[$((base - 5))] [$base] [$((base - 5))] $base" ]
	# task_nice in lcd.json: 0 runs tasks at lcd's own; 19 is the floor
	for n in 0 19; do
		stop_lcd
		echo "{\"task_nice\": $n}" >"$T/lcd.json"
		start_lcd
		want=$((base + n > 19 ? 19 : base + n))
		[ "$("$LCCTL" run nicety:show)" -eq "$want" ]
	done
	stop_lcd
	# anything else is refused at start, in one line
	for bad in -1 20 '"5"' 2.5; do
		echo "{\"task_nice\": $bad}" >"$T/lcd.json"
		run "$LCD" --socket "$LCD_SOCKET" --config "$T/lcd.json"
		[ "$status" -eq 121 ]
		[ "$output" = "lcd: config $T/lcd.json: task_nice: expected an integer from 0 to 19" ]
	done
}

@test "sandbox API: an exec's command and its helper are in the sandbox's own cgroup, a session's too; the runner's child that made it is not" {
	# lcd's execs are made by a child of its runner (single-threaded):
	# the helper is cloned straight into the cgroup (no cgroup.procs
	# move), and the runner's child stays outside it.
	id=$(api POST /sandboxes '{}' | head -1 | jq -r .id)
	cg=$("$LCRUN" inspect "$id" | jq -r .cgroup)
	[ -d "$cg" ]
	r=$(api POST "/sandboxes/$id/exec" '{"cmd": "grep ^0:: /proc/self/cgroup"}' | head -1)
	[ "$(echo "$r" | jq -r .exit_code)" = 0 ]
	[ "$(echo "$r" | jq -r .stdout)" = "0::/" ]
	s=$(api POST "/sandboxes/$id/sessions" '{}' | head -1 | jq -r .id)
	r=$(api POST "/sandboxes/$id/sessions/$s/run" '{"cmd": "grep ^0:: /proc/self/cgroup"}' | head -1)
	[ "$(echo "$r" | jq -r .stdout)" = "0::/" ]
	# while a command runs, the sandbox's cgroup holds pid 1, the helper
	# and the command, and no process of lcd's own cgroup
	api POST "/sandboxes/$id/exec" '{"cmd": "sleep 3"}' >/dev/null &
	bg=$!
	for _ in $(seq 50); do grep -qx "$(pgrep -f '^sleep 3$' | head -1)" "$cg/cgroup.procs" 2>/dev/null && break; sleep 0.1; done
	pid=$(pgrep -f '^sleep 3$' | head -1)
	[ -n "$pid" ]
	grep -qx "$pid" "$cg/cgroup.procs"
	# the helper (the command's parent) is in it; the runner's child
	# (lcd-exec, under lcd-runner, lcd's child) stays in lcd's cgroup
	ppid() { awk '/^PPid:/ {print $2}' "/proc/$1/status"; }
	helper=$pid stand=$(ppid "$pid")
	while [ "$(cat "/proc/$stand/comm")" != lcd-exec ]; do
		[ "$stand" -gt 1 ]
		helper=$stand stand=$(ppid "$stand")
	done
	[ "$(cat "/proc/$(ppid "$stand")/comm")" = lcd-runner ]
	[ "$(ppid "$(ppid "$stand")")" = "$LCD_PID" ]
	[ "$(cat "/proc/$helper/comm")" = lcrun-exec ]
	grep -qx "$helper" "$cg/cgroup.procs"
	if grep -qx "$stand" "$cg/cgroup.procs"; then false; fi
	[ "$(grep '^0::' "/proc/$stand/cgroup")" = "$(grep '^0::' "/proc/$LCD_PID/cgroup")" ]
	kill "$bg" 2>/dev/null || true
	wait "$bg" 2>/dev/null || true
	api DELETE "/sandboxes/$id" >/dev/null
}

@test "sandbox API: a snapshot's and a fork's image go when their time is up, and their space with them" {
	stop_lcd
	echo '{"fork_image_ttl": 1, "snapshot_image_ttl": 1}' >"$T/lcd.json"
	start_lcd
	id=$("$LCCTL" sandbox create)
	"$LCCTL" sandbox exec "$id" -- sh -c 'head -c 8388608 /dev/urandom >/root/big'
	before=$(du -sk "$LCRUN_ROOT/images/blobs" | cut -f1)
	"$LCCTL" sandbox snapshot "$id" ttl-snap >/dev/null
	fork=$("$LCCTL" sandbox fork "$id" 1 --json | jq -r '.[0]')
	forkimg=$("$LCCTL" sandbox show "$fork" | jq -r .image)
	"$LCRUN" image ls | grep -q "^ttl-snap "
	"$LCRUN" image ls | grep -q "^$forkimg "
	grown=$(du -sk "$LCRUN_ROOT/images/blobs" | cut -f1)
	[ $((grown - before)) -ge 8192 ]
	"$LCCTL" sandbox rm "$fork"
	"$LCCTL" sandbox rm "$id"
	sleep 1.5 # both images' time is up; a start of lcd collects at once
	stop_lcd
	start_lcd
	for _ in $(seq 100); do
		"$LCRUN" image ls | grep -q "^ttl-snap \|^$forkimg " || break
		sleep 0.1
	done
	run "$LCRUN" image ls
	[[ "$output" != *ttl-snap* && "$output" != *"$forkimg"* ]]
	# the names went, and the blobs only they used with them
	for _ in $(seq 50); do
		[ "$(du -sk "$LCRUN_ROOT/images/blobs" | cut -f1)" -lt $((before + 1024)) ] && break
		sleep 0.1
	done
	[ "$(du -sk "$LCRUN_ROOT/images/blobs" | cut -f1)" -lt $((before + 1024)) ]
	grep -q "images: pruned" "$T/lcd.log"
}
