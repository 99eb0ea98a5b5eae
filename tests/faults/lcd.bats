#!/usr/bin/env bats
# kill -9 of lcd at every named step of a sandbox create, snapshot, fork,
# upload, download, and of a task's start and end (LCRUN_FAULT, a test
# build's hook), then lcd started again, and what must hold: lcd.db passes
# PRAGMA integrity_check, nothing half-made is listed, no task ran twice
# or is left running, lcrun gc and lcd's start leave nothing of a dead
# sandbox on the host (faults-lib.bash), no secret is on disk outside
# lcd.db, and the next identical request works.  Root; a private lcd
# (LCRUN_ROOT, state directory, socket) per test.

load faults-lib
load ../integration/lcd-lib
load ../integration/doubles-lib
load ../integration/gateway-lib

setup() {
	faults_setup
	T=$F
	LCD=$BIN/lcd LCCTL=$BIN/lcctl
	export LCD_SOCKET="$F/lcd.sock"
	SECRET="faults-secret-$RANDOM$RANDOM$RANDOM"
	cat >"$F/app.json" <<-'EOF'
	{"name": "fa", "functions": {
	  "once": {"command": ["/bin/sh", "-c", "echo ran-once; printf '{\"n\": 1}' >/run/task/result.json; sleep 0.3"],
	           "secrets": ["FA_TOKEN"]}
	}, "sandboxes": {"max": 8}}
	EOF
}

teardown() {
	stop_lcd
	lcd_leftovers_remove >/dev/null 2>&1 || true
	[ -z "${GW_UP:-}" ] || { dbl_stop model; dbl_netns_down; }
	faults_teardown
}

# lcd with LCRUN_FAULT=STEP; the secret set and the app deployed before
# any step is reached (a fresh lcd passes none of them at start).
start_faulty_lcd() { # STEP[:N]
	rm -f "$F/fault.log"
	start_lcd env LCRUN_FAULT="$1" LCRUN_FAULT_LOG="$F/fault.log"
	printf '%s\n' "$SECRET" | "$LCCTL" secret set FA_TOKEN
	"$LCCTL" deploy "$F/app.json" >/dev/null
}

# lcd died at STEP (10 s at most), killed by the hook; then it is started
# again, and the invariants hold.
lcd_died_at() { # STEP
	local step=${1%%:*}
	for _ in $(seq 100); do kill -0 "$LCD_PID" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$LCD_PID" 2>/dev/null; then
		echo "lcd is still running: step $step was not reached" >&2
		return 1
	fi
	local rc=0
	wait "$LCD_PID" || rc=$?
	LCD_PID=
	grep -qx "$step killed" "$F/fault.log"
	[ "$rc" -eq 137 ]
	start_lcd
	lcd_invariants
}

images() { # lcd's list of images, as the operator sees it
	curl -sf --unix-socket "$LCD_SOCKET" http://lcd/v1/images
}

lcd_invariants() {
	[ "$(sqlite3 "$LCRUN_ROOT/lcd.db" 'PRAGMA integrity_check')" = ok ]
	# no sandbox half made or half removed is listed; each listed one runs
	run "$LCCTL" sandbox ls --json
	[ "$status" -eq 0 ]
	echo "$output" | jq -e 'all(.[]; .state == "running" or .state == "live")' >/dev/null || {
		echo "lcd lists a sandbox that is not running: $output" >&2
		return 1
	}
	local id
	for id in $(echo "$output" | jq -r '.[].id'); do
		[ "$(timeout 20 "$LCCTL" sandbox exec "$id" -- echo ok)" = ok ]
	done
	# no task left running or starting
	[ "$("$LCCTL" task list --json | jq '[.[] | select(.state == "running")] | length')" -eq 0 ]
	faults_check
	secret_nowhere "$SECRET" "$F"
}

@test "faults: lcd: the lcd steps are not reached by a plain start" {
	start_faulty_lcd lcd-create-row
	"$LCCTL" status >/dev/null
	[ ! -s "$F/fault.log" ]
}

create_case() { # STEP
	start_faulty_lcd "$1"
	run "$LCCTL" sandbox create --secret FA_TOKEN
	[ "$status" -ne 0 ]
	lcd_died_at "$1"
	# the next identical request works
	sb=$("$LCCTL" sandbox create --secret FA_TOKEN)
	[ "$("$LCCTL" sandbox exec "$sb" -- sh -c 'echo ${#FA_TOKEN}')" = ${#SECRET} ]
	"$LCCTL" sandbox rm "$sb"
}

@test "faults: lcd: create: lcd-create-row" { create_case lcd-create-row; }
@test "faults: lcd: create: lcd-create-made (the made sandbox is removed at start)" { create_case lcd-create-made; }
@test "faults: lcd: create: lcd-create-live" { create_case lcd-create-live; }

# A sandbox made by a clean lcd, then an lcd with the fault for the rest.
with_sandbox() { # STEP
	start_lcd
	printf '%s\n' "$SECRET" | "$LCCTL" secret set FA_TOKEN
	SB=$("$LCCTL" sandbox create --secret FA_TOKEN)
	"$LCCTL" sandbox exec "$SB" -- sh -c 'head -c 3000000 /dev/urandom >/root/big; echo v1 >/root/mark'
	stop_lcd
	start_faulty_lcd "$1"
}

snapshot_case() { # STEP
	with_sandbox "$1"
	run "$LCCTL" sandbox snapshot "$SB" snap1
	[ "$status" -ne 0 ]
	lcd_died_at "$1"
	# the sandbox runs on (not left frozen); the image, if it was made, is
	# whole and recorded as the operator's; otherwise the request works now
	[ "$(timeout 20 "$LCCTL" sandbox exec "$SB" -- cat /root/mark)" = v1 ]
	if "$LCRUN" image inspect snap1 >/dev/null 2>&1; then
		images | jq -e '.images[] | select(.name == "snap1") | .owner == "operator" and .kind == "snapshot"'
	else
		"$LCCTL" sandbox snapshot "$SB" snap1
	fi
	sb2=$("$LCCTL" sandbox create --image snap1)
	[ "$("$LCCTL" sandbox exec "$sb2" -- cat /root/mark)" = v1 ]
	"$LCCTL" sandbox rm "$SB" "$sb2"
}

@test "faults: lcd: snapshot: snapshot-frozen (lcd's start thaws it)" { snapshot_case snapshot-frozen; }
@test "faults: lcd: snapshot: image-layer-written" { snapshot_case image-layer-written; }
@test "faults: lcd: snapshot: lcd-snapshot-made (recorded as lcd's all the same)" { snapshot_case lcd-snapshot-made; }
@test "faults: lcd: snapshot: lcd-snapshot-recorded" { snapshot_case lcd-snapshot-recorded; }

fork_case() { # STEP
	with_sandbox "$1"
	run "$LCCTL" sandbox fork "$SB" 2
	[ "$status" -ne 0 ]
	lcd_died_at "$1"
	# a fork image left is recorded with its end (fork_image_ttl)
	images | jq -e 'all(.images[] | select(.name | startswith("fork/")); .kind == "fork" and .expires != null)'
	if [ "$1" = lcd-fork-snapshot ]; then
		# the kill came after the snapshot: its image is there to be collected
		images | jq -e '[.images[] | select(.name | startswith("fork/"))] | length == 1'
	fi
	run "$LCCTL" sandbox fork "$SB" 2 --json
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | jq length)" -eq 2 ]
	for id in $(echo "$output" | jq -r '.[]'); do
		[ "$("$LCCTL" sandbox exec "$id" -- cat /root/mark)" = v1 ]
		"$LCCTL" sandbox rm "$id"
	done
	"$LCCTL" sandbox rm "$SB"
}

@test "faults: lcd: fork: lcd-fork-snapshot (the image is recorded with its end)" { fork_case lcd-fork-snapshot; }
@test "faults: lcd: fork: lcd-create-made:2 (the second sandbox made)" { fork_case lcd-create-made:2; }

# The names in DIR of the sandbox other than the ones given: an upload's
# temporary file left there would show.
others_in() { # SB DIR NAME…
	local sb=$1 dir=$2
	shift 2
	"$LCCTL" sandbox exec "$sb" -- ls -A "$dir" | grep -vxF "$(printf '%s\n' "$@")" || true
}

# CMD… uploads a body it reads from standard input: 3 MB of the 8 MB it
# announced are sent, then the client is killed.
cut_upload() {
	mkfifo "$F/body"
	"$@" <"$F/body" >"$F/curl.out" 2>&1 &
	local cpid=$!
	exec 7>"$F/body"
	head -c 3000000 /dev/urandom >&7
	sleep 1
	kill "$cpid"
	exec 7>&-
	wait "$cpid" || true
	rm -f "$F/body"
}

temp_gone() { # SB DIR NAME: wait (5 s at most) until DIR holds nothing but NAME's own file
	for _ in $(seq 50); do
		[ -z "$(others_in "$1" "$2" "$3")" ] && return 0
		sleep 0.1
	done
}

@test "faults: lcd: upload: lcd-upload-writing (what was there stays whole, no temporary is left)" {
	with_sandbox lcd-upload-writing
	"$LCCTL" sandbox exec "$SB" -- sh -c 'echo old >/root/up'
	head -c 4000000 /dev/urandom >"$F/up"
	run "$LCCTL" sandbox cp "$F/up" "$SB:/root/up"
	[ "$status" -ne 0 ]
	lcd_died_at lcd-upload-writing
	[ "$("$LCCTL" sandbox exec "$SB" -- cat /root/up)" = old ]
	[ -z "$(others_in "$SB" /root big mark up)" ]
	"$LCCTL" sandbox cp "$F/up" "$SB:/root/up"
	"$LCCTL" sandbox cp "$SB:/root/up" "$F/down"
	cmp "$F/up" "$F/down"
	"$LCCTL" sandbox rm "$SB"
}

@test "faults: lcd: upload: lcd-upload-written" {
	with_sandbox lcd-upload-written
	echo small >"$F/up"
	run "$LCCTL" sandbox cp "$F/up" "$SB:/root/up"
	[ "$status" -ne 0 ]
	lcd_died_at lcd-upload-written
	# written whole before the kill, though never acknowledged
	[ "$("$LCCTL" sandbox exec "$SB" -- cat /root/up)" = small ]
	"$LCCTL" sandbox rm "$SB"
}

# The client goes away midway: the old file stays whole, the part written
# is removed (lcd notices the cut connection; nothing is killed).
@test "faults: lcd: upload: a client cut off midway leaves the old file whole" {
	start_lcd
	SB=$("$LCCTL" sandbox create)
	"$LCCTL" sandbox exec "$SB" -- sh -c 'echo old >/root/up'
	cut_upload curl -s --unix-socket "$LCD_SOCKET" -T - -H 'Content-Length: 8000000' \
		"http://lcd/v1/sandboxes/$SB/files?path=/root/up"
	# (lcd sees the connection end and drops the upload)
	temp_gone "$SB" /root up
	[ "$("$LCCTL" sandbox exec "$SB" -- cat /root/up)" = old ]
	[ -z "$(others_in "$SB" /root up)" ]
	# and the next upload replaces it whole, with the mode asked for
	head -c 3000000 /dev/urandom >"$F/up"
	curl -sf --unix-socket "$LCD_SOCKET" -T "$F/up" "http://lcd/v1/sandboxes/$SB/files?path=/root/up&mode=0600" >/dev/null
	"$LCCTL" sandbox cp "$SB:/root/up" "$F/down"
	cmp "$F/up" "$F/down"
	[ "$("$LCCTL" sandbox exec "$SB" -- stat -c %a /root/up)" = 600 ]
	[ -z "$(others_in "$SB" /root up)" ]
	"$LCCTL" sandbox rm "$SB"
}

@test "faults: lcd: download: lcd-download-streaming" {
	with_sandbox lcd-download-streaming
	run sh -c "'$LCCTL' sandbox cp '$SB:/root' - >'$F/root.tar'"
	[ "$status" -ne 0 ]
	lcd_died_at lcd-download-streaming
	"$LCCTL" sandbox cp "$SB:/root" - >"$F/root.tar"
	tar -xOf "$F/root.tar" root/mark | grep -qx v1
	"$LCCTL" sandbox rm "$SB"
}

# A task of "once" (no retries), killed at STEP: at most one run of it, its
# end recorded once lcd is back (failed, or succeeded when the kill came
# after its end was written), never run again, its secret nowhere.
task_case() { # STEP END-STATE
	start_faulty_lcd "$1"
	run "$LCCTL" run -d fa:once
	task=$output
	# the worker may claim it, and die, before lcd answers: the spawn is
	# in lcd.db all the same (it is the only task)
	if [ "$status" -ne 0 ]; then
		[ "$(sqlite3 "$LCRUN_ROOT/lcd.db" 'SELECT count(*) FROM tasks')" -eq 1 ]
		task=$(sqlite3 "$LCRUN_ROOT/lcd.db" 'SELECT id FROM tasks')
	fi
	lcd_died_at "$1"
	wait_state "$task" "$2" 30
	sleep 1.5 # a task run again would show by now
	[ "$(state_of "$task")" = "$2" ]
	[ "$("$LCCTL" task logs "$task" | grep -c '^ran-once$')" -le 1 ]
	[ "$("$LCCTL" task show "$task" | jq .attempts)" -eq 1 ]
	# the next identical request works
	t2=$("$LCCTL" run -d fa:once)
	wait_state "$t2" succeeded 60
	[ "$("$LCCTL" task logs "$t2" | grep -c '^ran-once$')" -eq 1 ]
	secret_nowhere "$SECRET" "$F"
}

@test "faults: lcd: task: lcd-task-claimed" { task_case lcd-task-claimed failed; }
@test "faults: lcd: task: lcd-task-starting" { task_case lcd-task-starting failed; }
@test "faults: lcd: task: lcd-task-exited" { task_case lcd-task-exited failed; }
@test "faults: lcd: task: lcd-task-ended (its end was written: not run again)" { task_case lcd-task-ended succeeded; }

# A devbox's first start (made by `lcctl devbox NAME ssh`), killed once its
# sandbox is made but before sshd is set up in it: lcd's start must not
# leave a box that says running without sshd; the next login starts it.
@test "faults: lcd: devbox: lcd-devbox-made (the next login sets the box up)" {
	command -v ssh >/dev/null && command -v mkfs.ext4 >/dev/null && [ -x /usr/sbin/sshd ] ||
		skip "needs ssh, sshd and mkfs.ext4"
	export HOME="$F/home"
	mkdir -p -m 0700 "$HOME/.ssh"
	ssh-keygen -q -t ed25519 -N '' -C faults -f "$HOME/.ssh/id_ed25519"
	SSHO=(-F /dev/null -i "$HOME/.ssh/id_ed25519" -o BatchMode=yes -o ConnectTimeout=60)
	start_faulty_lcd lcd-devbox-made
	"$LCCTL" devbox create b1 --image host --disk 64M
	run timeout 60 "$LCCTL" devbox b1 ssh "${SSHO[@]}" -- true
	[ "$status" -ne 0 ]
	lcd_died_at lcd-devbox-made
	run "$LCCTL" devbox b1 ssh "${SSHO[@]}" -- 'echo "in $LCRUN_DEVBOX"'
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"in b1"* ]]
	[ "$("$LCCTL" devbox show b1 | jq -r .state)" = running ]
	"$LCCTL" devbox stop b1
	"$LCCTL" disk delete b1
	# and with the box, its disk's mount is gone
	if awk -v f="$F" 'index($5, f) == 1 { found = 1 } END { exit !found }' /proc/self/mountinfo; then
		echo "mounts left under $F" >&2
		return 1
	fi
}

# The model gateway against the Anthropic double (a network namespace of
# the test's own, TLS with a CA of the test's own), lcd killed at STEP.
# The double's log (it holds the real key, as the provider would) is kept
# out of $F, where no secret may be.
gateway_up() { # STEP
	export DBL_NS=lcfgw-$$ W=$F GW_CA=$F/ca
	gw_ca "$GW_CA"
	cat >"$F/turns.json" <<-'EOF'
	{"turns": [{"text": "first", "usage": {"input_tokens": 1000, "output_tokens": 100}},
	           {"text": "second", "usage": {"input_tokens": 2000, "output_tokens": 10}},
	           {"text": "third", "usage": {"input_tokens": 3000, "output_tokens": 1}}]}
	EOF
	GW_UP=1
	dbl_netns_up
	dbl_start anthropic-double.py model --listen "$DBL4" --script "$F/turns.json" --log "$BATS_TEST_TMPDIR/req.jsonl" \
		--tls-cert "$GW_CA/srv.pem" --tls-key "$GW_CA/srv.key"
	jq -n --arg u "https://$DBL4:$DBL_PORT" --arg ca "$GW_CA/ca.pem" \
		'{gateway: {upstreams: {anthropic: $u}, ca_file: $ca, idle_timeout: 3}}' >"$F/lcd.json"
	GW_PROVIDER=anthropic
	start_lcd
	printf '%s\n' "$SECRET" | "$LCCTL" secret set ANTHROPIC_API_KEY
	SB=$("$LCCTL" sandbox create --model-gateway anthropic:ANTHROPIC_API_KEY --budget-usd 5)
	stop_lcd
	rm -f "$F/fault.log"
	start_lcd env LCRUN_FAULT="$1" LCRUN_FAULT_LOG="$F/fault.log"
}

S4=claude-sonnet-4-5

# Killed while an answer streams: the client sees the stream end, lcd comes
# back, the sandbox's token still works, and the next request is metered.
@test "faults: lcd: gateway: lcd-gateway-streaming" {
	gateway_up lcd-gateway-streaming
	run ask "$SB" "{\"model\": \"$S4\", \"stream\": true, \"messages\": []}"
	echo "$output"
	lcd_died_at lcd-gateway-streaming
	run ask "$SB" "{\"model\": \"$S4\", \"messages\": []}"
	echo "$output"
	[ "${lines[-1]}" = 200 ]
	[ "$(echo "${lines[0]}" | jq -r '.content[0].text')" = second ]
	[ "$(ledger "sandbox_id = '$SB' AND outcome = 'ok'" | jq -r .input_tokens)" = 2000 ]
	"$LCCTL" sandbox rm "$SB"
}

# Killed right after a request's ledger row was written: the row is there
# after the restart (a committed row is never lost), counted once.
@test "faults: lcd: gateway: lcd-ledger-written (the committed row survives)" {
	gateway_up lcd-ledger-written
	run ask "$SB" "{\"model\": \"$S4\", \"messages\": []}"
	echo "$output"
	lcd_died_at lcd-ledger-written
	[ "$(ledger "sandbox_id = '$SB'" | jq -r '"\(.outcome) \(.input_tokens) \(.cost_pusd)"')" = "ok 1000 4500000000" ]
	run ask "$SB" "{\"model\": \"$S4\", \"messages\": []}"
	[ "${lines[-1]}" = 200 ]
	[ "$(ledger "sandbox_id = '$SB'" | wc -l)" -eq 2 ]
	[ "$("$LCCTL" sandbox show "$SB" | jq -r .spend_usd)" = 0.01065 ]
	"$LCCTL" sandbox rm "$SB"
}
