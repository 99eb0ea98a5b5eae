#!/usr/bin/env bats
# lcd and lcctl as an operator uses them: a private lcd per test (temp
# LCRUN_ROOT, LCRUN_STATE_DIR and socket), the app in
# tests/fixtures/lcd/app.json, tasks run for real with lc_run().
# Needs root.  $LCRUN names the built lcrun; lcd and lcctl sit beside it.

FIXTURES="$BATS_TEST_DIRNAME/../fixtures/lcd"

load lcd-lib

setup() {
	lcd_setup
	SECRET="s3cr3t-$RANDOM-$RANDOM-value"
	start_lcd
	"$LCCTL" deploy "$FIXTURES/app.json"
}

teardown() {
	stop_lcd
	[ -n "${NS:-}" ] && ip netns del "$NS" 2>/dev/null
	# Sandboxes whose lcd was killed are the runtime gc's to remove; until
	# `lcrun gc` exists, drop their (empty) cgroups here.
	cg=$(awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo)
	for sb in ${KILLED_SANDBOXES:-}; do
		[ -n "$cg" ] && rmdir "$cg/lcrun/$sb" 2>/dev/null || true
	done
	lcd_teardown
}

# How many tasks of function FN (in STATE, "" for any) there are.  The
# fixture's schedules (e.g. "quarter", every 15 minutes by the real clock)
# may add tasks of their own function at any time: a test counts only the
# tasks of the function it spawned.
count_fn() { # FN [STATE]
	"$LCCTL" task list --app demo --json |
		jq --arg f "$1" --arg s "${2:-}" '[.[] | select(.function == $f and ($s == "" or .state == $s))] | length'
}

@test "lcd: a function writes a result; lcctl shows result, logs and state" {
	run "$LCCTL" run demo:hello '{"who": "bats"}'
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | jq -r .greeting)" = hi ]
	[ "$(echo "$output" | jq -r .args.who)" = bats ]
	id=$("$LCCTL" task list --app demo --json | jq -r '.[0].id')
	[ "$(state_of "$id")" = succeeded ]
	"$LCCTL" task show "$id" | jq -e '.exit_code == 0 and .attempts == 1 and .result.greeting == "hi"'
	run "$LCCTL" task logs "$id"
	[[ "$output" == *"hello from $id"* ]]
	[[ "$output" == *oops* ]]            # stderr is kept too
	[[ "$output" == *'{"who":"bats"}'* ]] # args.json as the task saw it
	run "$LCCTL" task list
	[[ "$output" == *"$id"*demo:hello*succeeded* ]]
	# detached: prints the id, the result is there later
	id2=$("$LCCTL" run --detach demo:hello '{"n": 2}')
	wait_state "$id2" succeeded
	api GET "/tasks/$id2/result?wait=5" | head -1 | jq -e '.result.args.n == 2'
}

@test "lcd: one lcd on SQLite without node_slots runs tasks however many sandboxes it holds" {
	[ "${LCD_TEST_DB:-sqlite}" = sqlite ] || skip "one lcd on SQLite only"
	# as many sandboxes as a node's default slots (16 per core)
	slots=$("$LCCTL" node ls --json | jq '.[0].slots')
	[ "$slots" -eq $((16 * $(nproc))) ]
	sbs=()
	for _ in $(seq "$slots"); do sbs+=("$("$LCCTL" sandbox create)"); done
	# (node ls counts them at the next heartbeat, every 5 s)
	for _ in $(seq 100); do [ "$("$LCCTL" node ls --json | jq '.[0].free')" = 0 ] && break; sleep 0.1; done
	"$LCCTL" node ls --json | jq -e '.[0].free == 0'
	# a task still runs, as before there were nodes
	id=$("$LCCTL" run --detach demo:hello '{"who": "full"}')
	wait_state "$id" succeeded 60
	"$LCCTL" sandbox rm "${sbs[@]}" >/dev/null
}

@test "lcd: failures, timeouts and retries end in the right state and exit code" {
	run "$LCCTL" run demo:fail
	[ "$status" -eq 3 ]
	[[ "$output" == *"lcctl: task "*" failed: exited with status 3"* ]]
	id=$("$LCCTL" task list --json | jq -r '.[0].id')
	"$LCCTL" task show "$id" | jq -e '.result == 3' # no result.json: the exit status
	run "$LCCTL" run demo:sleeper
	[ "$status" -eq 124 ]
	id=$("$LCCTL" task list --json | jq -r '.[0].id')
	[ "$(state_of "$id")" = timed-out ]
	run "$LCCTL" run demo:flaky
	[ "$status" -eq 1 ]
	id=$("$LCCTL" task list --json | jq -r '.[0].id')
	"$LCCTL" task show "$id" | jq -e '.state == "failed" and .attempts == 3'
	[ "$("$LCCTL" task logs "$id" | grep -c '^attempt$')" -eq 3 ]
}

@test "lcd: queue: concurrency 3 and queue 20, 30 spawns: 3 run, 20 wait, 7 refused, 23 finish" {
	# demo:gated waits until the test puts "go" in its /run/task, i.e. in
	# $LCRUN_ROOT/lcd/tasks/ID on the host: nothing ends by itself.
	ids=() refused=0
	for i in $(seq 30); do
		if out=$("$LCCTL" run --detach demo:gated 2>"$T/err"); then
			ids+=("$out")
		else
			rc=$?
			[ "$rc" -eq 119 ]
			grep -q 'demo:gated is full: [0-9]* running, [0-9]* queued (concurrency 3, queue 20)' "$T/err"
			refused=$((refused + 1))
		fi
	done
	[ "${#ids[@]}" -eq 23 ]
	[ "$refused" -eq 7 ]
	for _ in $(seq 100); do [ "$(count_fn gated running)" -eq 3 ] && break; sleep 0.1; done
	[ "$(count_fn gated running)" -eq 3 ]
	[ "$(count_fn gated queued)" -eq 20 ]
	# the API says 429, at once
	run api POST /apps/demo/functions/gated/spawn '{}'
	[ "${lines[1]}" = 429 ]
	# release them as they start: all 23 finish, never more than 3 at once
	for _ in $(seq 600); do
		[ "$(count_fn gated succeeded)" -eq 23 ] && break
		running=$("$LCCTL" task list --app demo --state running --json | jq -r '.[] | select(.function == "gated") | .id')
		[ "$(echo "$running" | grep -c .)" -le 3 ]
		for id in $running; do touch "$LCRUN_ROOT/lcd/tasks/$id/go" 2>/dev/null || true; done
		sleep 0.1
	done
	[ "$(count_fn gated succeeded)" -eq 23 ]
	[ "$(count_fn gated)" -eq 23 ] # nothing refused was stored
	for id in "${ids[@]}"; do "$LCCTL" task logs "$id" | grep -qx released; done
}

@test "lcd: spawn_map of 50 argument sets: 50 tasks, each with its own arguments" {
	body=$(jq -cn '{args: [range(50) | {i: .}]}')
	run api POST /apps/demo/functions/many/spawn_map "$body"
	[ "${lines[1]}" = 202 ]
	[ "$(echo "${lines[0]}" | jq '.ids | length')" -eq 50 ]
	for id in $(echo "${lines[0]}" | jq -r '.ids[]'); do
		r=$(api GET "/tasks/$id/result?wait=120" | head -1)
		echo "$r" | jq -e '.state == "succeeded" and .result.i == .args.i' >/dev/null || { echo "task $id: $r"; "$LCCTL" task logs "$id" || true; false; }
	done
	# its own 50 tasks, by id: a schedule of the app may have run meanwhile
	[ "$("$LCCTL" task list --app demo --state succeeded --json |
		jq --argjson ids "$(echo "${lines[0]}" | jq .ids)" '[.[] | select(.id as $i | $ids | index($i)) | .result.i] | unique | length')" -eq 50 ]
	# a map that does not fit is refused whole
	body=$(jq -cn '{args: [range(200) | {i: .}]}')
	run api POST /apps/demo/functions/many/spawn_map "$body"
	[ "${lines[1]}" = 429 ]
	[ "$(count_fn many)" -eq 50 ]
}

@test "lcd: a task's pid 1 shows lcrun-init, nothing of lcd's command line; its environment stays closed" {
	echo "$SECRET" | "$LCCTL" secret set DEMO_TOKEN
	# every process but the reader's own: cmdline and comm; pid 1's environ
	read_procs='for d in /proc/[0-9]*; do
		p=${d#/proc/}; [ "$p" = "$$" ] && continue
		[ "$(cat $d/comm 2>/dev/null)" = tr ] && continue
		printf "P: %s cmdline=[%s] comm=[%s]\n" "$p" "$(tr "\0" "|" <$d/cmdline 2>/dev/null)" "$(cat $d/comm 2>/dev/null)"
	done
	cat /proc/1/environ >/dev/null 2>&1 && echo "P: pid 1 environ readable"
	true'
	jq -n --arg cmd "$read_procs" \
		'{name: "ptitle", functions: {read: {command: $cmd, secrets: ["DEMO_TOKEN"], timeout: 60}}}' >"$T/ptitle.json"
	"$LCCTL" deploy "$T/ptitle.json"
	run "$LCCTL" run ptitle:read
	[ "$status" -eq 0 ]
	id=$("$LCCTL" task list --app ptitle --json | jq -r '.[0].id')
	run "$LCCTL" task logs "$id"
	echo "$output"
	out=$(grep '^P: ' <<<"$output")
	[ "$(head -1 <<<"$out")" = "P: 1 cmdline=[lcrun-init|] comm=[lcrun-init]" ]
	[ "$(grep -c . <<<"$out")" -eq 1 ]
	# lcd's flags and paths (its socket and config live in $T)
	[[ "$out" != *"$T"* ]]
	[[ "$out" != *--socket* ]]
	[[ "$out" != *--config* ]]
	[[ "$out" != *"$SECRET"* ]]
}

@test "lcd: a function's mounts: only under bind_roots; idmapped, the task's files are the tree's owner's; readonly stays so" {
	# without bind_roots in lcd.json no host path is bound
	mkdir -p "$T/roots/co" "$T/roots/ro" "$T/elsewhere"
	jq -n --arg s "$T/roots/co" '{name: "mnt", functions: {build: {command: "true", mounts: [{source: $s, target: "/src"}]}}}' >"$T/mnt.json"
	run "$LCCTL" deploy "$T/mnt.json"
	[ "$status" -eq 118 ]
	[ "$output" = "lcctl: functions.build.mounts[0].source: $T/roots/co: lcd binds no host path into tasks unless lcd.json lists it under \"bind_roots\"" ]

	stop_lcd
	jq -n --arg r "$T/roots" '{bind_roots: [$r]}' >"$T/lcd.json"
	start_lcd
	printf 'all:\n\techo built >out.txt\n' >"$T/roots/co/Makefile"
	chown -R 1000:1000 "$T/roots/co"
	echo data >"$T/roots/ro/f"
	ln -s "$T/elsewhere" "$T/roots/sneaky"
	jq -n --arg s "$T/roots/co" --arg r "$T/roots/ro" --arg e "$T/elsewhere" --arg k "$T/roots/sneaky" '{name: "mnt", functions: {
		build: {command: "cd /src && stat -c %u:%g . && touch from-task && make -s && (echo x >/ro/f || echo ro-refused)",
			mounts: [{source: $s, target: "/src"}, {source: $r, target: "/ro", readonly: true}]},
		outside: {command: "true", mounts: [{source: $e, target: "/e"}]},
		sneaky: {command: "true", mounts: [{source: $k, target: "/e", idmap: true}]}}}' >"$T/mnt.json"
	# a source outside the roots is refused with its JSON path
	run "$LCCTL" deploy "$T/mnt.json"
	[ "$status" -eq 118 ]
	[ "$output" = "lcctl: functions.outside.mounts[0].source: $T/elsewhere is not under lcd's bind_roots" ]
	jq 'del(.functions.outside)' "$T/mnt.json" >"$T/mnt2.json"
	"$LCCTL" deploy "$T/mnt2.json"
	run "$LCCTL" run mnt:build
	[ "$status" -eq 0 ]
	id=$("$LCCTL" task list --app mnt --json | jq -r '.[0].id')
	run "$LCCTL" task logs "$id"
	echo "$output"
	[[ "$output" == *"0:0"* ]]        # the tree's owner is the task's root
	[[ "$output" == *ro-refused* ]]
	[ "$(stat -c %u:%g "$T/roots/co/from-task")" = 1000:1000 ]
	[ "$(stat -c %u:%g "$T/roots/co/out.txt")" = 1000:1000 ]
	[ "$(cat "$T/roots/ro/f")" = data ]
	# a link under a root that leads out of it: refused when the task starts
	run "$LCCTL" run mnt:sneaky
	[ "$status" -ne 0 ]
	id=$("$LCCTL" task list --app mnt --json | jq -r '.[0].id')
	"$LCCTL" task show "$id" | jq -e --arg m "mounts[0]: $T/roots/sneaky -> $T/elsewhere is not under lcd's bind_roots" \
		'.state == "failed" and (.error | contains($m))'
}

@test "lcd: claim race: 20 concurrent set --if-absent, exactly one wins; TTL expiry" {
	pids=()
	for i in $(seq 20); do
		( rc=0; "$LCCTL" map set demo/claims issue-7 "worker-$i" --if-absent 2>/dev/null || rc=$?
		  echo "$i $rc" >"$T/claim.$i" ) &
		pids+=($!)
	done
	wait "${pids[@]}"
	winners=$(cat "$T"/claim.* | awk '$2 == 0' | wc -l)
	losers=$(cat "$T"/claim.* | awk '$2 == 119' | wc -l)
	[ "$winners" -eq 1 ]
	[ "$losers" -eq 19 ]
	w=$(cat "$T"/claim.* | awk '$2 == 0 {print $1}')
	[ "$("$LCCTL" map get demo/claims issue-7)" = "worker-$w" ]

	"$LCCTL" map set demo/state lease holder --ttl 3
	[ "$("$LCCTL" map get demo/state lease)" = holder ]
	sleep 4
	run "$LCCTL" map get demo/state lease
	[ "$status" -eq 120 ]
	[ "$("$LCCTL" map ls demo/state --json | jq length)" -eq 0 ]
	"$LCCTL" map set demo/state lease next --if-absent # an expired key can be claimed
	"$LCCTL" map del demo/state lease
	run "$LCCTL" map get demo/nosuchmap k
	[ "$status" -eq 120 ]
}

@test "lcd: secrets: only a declaring function sees one; the value is never shown or logged" {
	echo "$SECRET" | "$LCCTL" secret set DEMO_TOKEN
	run "$LCCTL" secret ls
	[ "$output" = DEMO_TOKEN ]
	id=$("$LCCTL" run -d demo:withsecret)
	wait_state "$id" running
	# not on any command line (pgrep leaves itself out; a grep of ps's
	# output would find its own)
	if pgrep -af -- "$SECRET"; then false; fi
	run "$LCCTL" run demo:withsecret
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | jq .len)" -eq "${#SECRET}" ]
	run "$LCCTL" run demo:nosecret
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | jq .seen)" -eq 0 ]
	id=$("$LCCTL" task list --json | jq -r '.[0].id')
	"$LCCTL" task logs "$id" | grep -qx token-absent
	# nowhere to be read back
	if "$LCCTL" secret ls --json | grep -q "$SECRET"; then false; fi
	if "$LCCTL" task list --json | grep -q "$SECRET"; then false; fi
	if "$LCCTL" task show "$id" | grep -q "$SECRET"; then false; fi
	if lcd_sql_dump tasks | grep -q "$SECRET"; then false; fi
	if grep -rq "$SECRET" "$LCRUN_ROOT/lcd/logs" "$T/lcd.log"; then false; fi
	run api GET /secrets/DEMO_TOKEN
	[ "${lines[1]}" != 200 ]
	[ -n "${LCD_DATABASE:-}" ] || [ "$(stat -c %a "$LCRUN_ROOT/lcd.db")" = 600 ]
	"$LCCTL" secret delete DEMO_TOKEN
	run "$LCCTL" run demo:withsecret
	[ "$status" -ne 0 ]
	[[ "$output" == *"secret DEMO_TOKEN"*"is not set"* ]]
}

@test "lcd: a task's processes hold no copy of lcd's memory: another function's secret is not in them" {
	echo "$SECRET" | "$LCCTL" secret set DEMO_TOKEN
	run "$LCCTL" run demo:withsecret # lcd reads it from lcd.db for this one
	[ "$status" -eq 0 ]
	id=$("$LCCTL" run -d demo:longrun)
	wait_state "$id" running
	sb=$("$LCCTL" task show "$id" | jq -r .sandbox_id)
	for _ in $(seq 100); do pgrep -f '^sleep 317$' >/dev/null && break; sleep 0.1; done
	pgrep -f '^sleep 317$' >/dev/null
	# lcd, the runner and its child for the task, the sandbox.  (The
	# withsecret run's remover is detached: the next test reads it.)
	held=$(procs_holding "$SECRET" "$LCD_PID")
	echo "$held"
	# the search finds it where it is; lcd itself may hold it (what a fork
	# of lcd would copy), no other process of its
	probe_works "$SECRET"
	if echo "$held" | grep '^held ' | grep -vq "^held $LCD_PID lcd$"; then false; fi
	if echo "$held" | grep -q '^unreadable '; then false; fi
	for p in lcd-runner lcd-task lcrun-init sleep; do echo "$held" | grep -q "^clean [0-9]* $p$"; done
	"$LCCTL" task cancel "$id"
}

@test "lcd: what a task's run leaves running once it ended (its remover, the spares' holder) holds none of its secrets" {
	echo "$SECRET" | "$LCCTL" secret set DEMO_TOKEN
	run "$LCCTL" run demo:withsecret
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | jq .len)" -eq "${#SECRET}" ]
	# forks of the run's own process (the runner's child, which read the
	# secret with the task's spec), detached; one of them stays on as the
	# holder of the spare network namespaces
	pids=$(pgrep -x 'lcrun-rm|lcrun-net|lcrun-netspare' || true)
	echo "left: $pids"
	[ -n "$pids" ]
	held=$(procs_holding "$SECRET" $pids)
	echo "$held"
	[ -n "$held" ]
	if echo "$held" | grep -q '^held \|^unreadable '; then false; fi
	# the search finds it where it is
	probe_works "$SECRET"
}

@test "lcd: tasks and sandboxes are still made when the runner has gone, from lcd itself; the log says so" {
	runner=$(pgrep -P "$LCD_PID" -x lcd-runner)
	kill -9 "$runner"
	# ended (a zombie of lcd's until lcd finds out)
	for _ in $(seq 100); do [ "$(awk '{print $3}' "/proc/$runner/stat" 2>/dev/null)" = Z ] && break; sleep 0.05; done
	run "$LCCTL" run demo:hello '{"who": "after"}'
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | jq -r .args.who)" = after ]
	grep -q "the runner (pid $runner) has gone: sandboxes are now made from lcd itself" "$T/lcd.log"
	run "$LCCTL" run demo:fail
	[ "$status" -eq 3 ]
	# the sandbox API's create and exec too
	sb=$("$LCCTL" sandbox create)
	run "$LCCTL" sandbox exec "$sb" -- sh -c 'echo inside; exit 4'
	[ "$status" -eq 4 ]
	[ "$output" = inside ]
	# and its files, one at a time and as tar streams
	mkdir -p "$T/cp/tree" && echo one >"$T/cp/f" && echo two >"$T/cp/tree/g"
	"$LCCTL" sandbox cp "$T/cp/f" "$sb:/tmp/f"
	"$LCCTL" sandbox cp "$T/cp/tree" "$sb:/tmp"
	"$LCCTL" sandbox cp "$sb:/tmp/f" "$T/cp/f.back"
	mkdir "$T/cp/back" && "$LCCTL" sandbox cp "$sb:/tmp/tree" "$T/cp/back"
	cmp "$T/cp/f" "$T/cp/f.back"
	cmp "$T/cp/tree/g" "$T/cp/back/tree/g"
	"$LCCTL" sandbox rm "$sb"
}

@test "lcd: a stopped runner holds nothing up: lcd makes the calls itself until it reads its queue again; nothing runs twice" {
	runner=$(pgrep -P "$LCD_PID" -x lcd-runner)
	# what waits unread on the runner's socket (ss: Recv-Q of its end)
	queued() { ss -xpH | awk -v p="pid=$runner," 'index($0, p) {print $3}'; }
	[ "$(queued)" = 0 ]
	sb=$("$LCCTL" sandbox create)
	kill -STOP "$runner"
	# the first call waits for the runner's word (3 s), then lcd makes it
	# (bounded, so that a call that waits for ever fails the test instead
	# of hanging it)
	timeout 30 "$LCCTL" sandbox exec "$sb" -- sh -c 'echo x >>/tmp/count'
	one=$(queued)
	[ "$one" -gt 0 ]
	# the next ones find that request unread and never queue theirs: an
	# exec, a task, a file in and out
	for _ in 2 3; do timeout 30 "$LCCTL" sandbox exec "$sb" -- sh -c 'echo x >>/tmp/count'; done
	run timeout 30 "$LCCTL" run demo:hello '{"who": "stalled"}'
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | jq -r .args.who)" = stalled ]
	echo stalled-copy >"$T/stalled.txt"
	timeout 30 "$LCCTL" sandbox cp "$T/stalled.txt" "$sb:/tmp/stalled.txt"
	timeout 30 "$LCCTL" sandbox cp "$sb:/tmp/stalled.txt" "$T/stalled.back"
	[ "$(cat "$T/stalled.back")" = stalled-copy ]
	[ "$(queued)" = "$one" ]
	grep -q "the runner (pid $runner) took no request in 3 s: sandboxes are made from lcd itself until it reads its queue" \
		"$T/lcd.log"
	[ "$(grep -c 'took no request' "$T/lcd.log")" -eq 1 ]
	kill -CONT "$runner"
	# the request it finds queued has no one to answer: it runs nothing
	calls=3
	for _ in $(seq 50); do
		"$LCCTL" sandbox exec "$sb" -- sh -c 'echo x >>/tmp/count'
		calls=$((calls + 1))
		grep -q "the runner (pid $runner) reads its requests again" "$T/lcd.log" && break
		sleep 0.1
	done
	grep -q "the runner (pid $runner) reads its requests again" "$T/lcd.log"
	# and the calls after are the runner's again (an lcd-exec of its own)
	"$LCCTL" sandbox exec "$sb" -- sh -c 'echo x >>/tmp/count; exec sleep 2.5' &
	bg=$!
	calls=$((calls + 1))
	for _ in $(seq 50); do [ -n "$(pgrep -f '^sleep 2.5$')" ] && break; sleep 0.1; done
	[ -n "$(pgrep -f '^sleep 2.5$')" ]
	[ -n "$(pgrep -P "$runner" -x lcd-exec)" ]
	wait "$bg"
	[ "$("$LCCTL" sandbox exec "$sb" -- sh -c 'wc -l </tmp/count')" -eq "$calls" ]
	"$LCCTL" sandbox rm "$sb"
}

@test "lcd: schedules fire at their cron time by the test clock, catch up after a restart, pause" {
	stop_lcd
	CLOCK="$T/clock"
	echo 2030-01-01T02:59:00Z >"$CLOCK"
	rm -rf "$LCRUN_ROOT"
	lcd_store_forget
	start_lcd
	"$LCCTL" deploy "$FIXTURES/app.json"
	"$LCCTL" deployment stop quarter
	sleep 1
	[ "$(count)" -eq 0 ]
	echo 2030-01-01T03:00:20Z >"$CLOCK"
	for _ in $(seq 50); do [ "$(count)" -ge 1 ] && break; sleep 0.1; done
	sleep 1.5 # a second tick must not fire it again
	[ "$("$LCCTL" task list --json | jq '[.[] | select(.schedule == "nightly")] | length')" -eq 1 ]
	"$LCCTL" task list --json | jq -e '.[0].args.from == "schedule"'

	# lcd is down over two more nightly slots: each fires once after start
	kill -9 "$LCD_PID"; wait "$LCD_PID" 2>/dev/null || true
	echo 2030-01-03T03:00:10Z >"$CLOCK"
	start_lcd
	for _ in $(seq 50); do [ "$(count)" -ge 3 ] && break; sleep 0.1; done
	sleep 1.5
	[ "$("$LCCTL" task list --json | jq '[.[] | select(.schedule == "nightly")] | length')" -eq 3 ]
	# the paused schedule stayed paused across the restart and fired nothing
	"$LCCTL" deployment ls --json | jq -e '.[] | select(.name == "quarter") | .paused'
	[ "$("$LCCTL" task list --json | jq '[.[] | select(.schedule == "quarter")] | length')" -eq 0 ]
	# run APP:SCHEDULE fires it now, paused or not
	run "$LCCTL" run demo:quarter
	[ "$status" -eq 0 ]
	[ "$("$LCCTL" task list --json | jq '[.[] | select(.schedule == "quarter")] | length')" -eq 1 ]
	"$LCCTL" deployment start demo:quarter
	"$LCCTL" deployment ls --json | jq -e '.[] | select(.name == "quarter") | .paused | not'
}

@test "lcd: kill -9 mid-task: queued stay queued, running are failed or retried, sandboxes gone, state intact" {
	echo "$SECRET" | "$LCCTL" secret set DEMO_TOKEN
	"$LCCTL" map set demo/state keep me
	"$LCCTL" deployment stop demo:nightly
	a=$("$LCCTL" run -d demo:longrun); b=$("$LCCTL" run -d demo:longrun); c=$("$LCCTL" run -d demo:longrun)
	r=$("$LCCTL" run -d demo:retrier)
	wait_state "$a" running; wait_state "$b" running; wait_state "$r" running
	[ "$(state_of "$c")" = queued ]
	for id in "$a" "$b" "$r"; do
		for _ in $(seq 50); do "$LCCTL" task logs "$id" | grep -q started && break; sleep 0.1; done
	done
	pgrep -f '^sleep 317$' >/dev/null
	sb_a=$("$LCCTL" task show "$a" | jq -r .sandbox_id)
	[ -n "$sb_a" ] && [ "$sb_a" != null ]
	KILLED_SANDBOXES="$sb_a $("$LCCTL" task show "$b" | jq -r .sandbox_id) $("$LCCTL" task show "$r" | jq -r .sandbox_id)"

	kill -9 "$LCD_PID"; wait "$LCD_PID" 2>/dev/null || true
	start_lcd
	"$LCCTL" task show "$a" | jq -e '.state == "failed" and (.error | test("lcd restarted"))'
	"$LCCTL" task show "$b" | jq -e '.state == "failed"'
	# the retrier had a retry left: queued again and started anew
	"$LCCTL" task show "$r" | jq -e '.attempts >= 1 and (.state == "queued" or .state == "running")'
	# the queued one was not lost: it runs now (a place freed)
	[ "$(state_of "$c")" != failed ]
	[ "$(state_of "$c")" != cancelled ]
	# the old sandboxes were killed
	for _ in $(seq 50); do [ "$(pgrep -fc '^sleep 317$')" -le 1 ] && break; sleep 0.1; done
	[ "$(pgrep -fc '^sleep 317$')" -le 1 ] # only c's, if it started
	# maps, secrets and schedules survived
	[ "$("$LCCTL" map get demo/state keep)" = me ]
	[ "$("$LCCTL" secret ls)" = DEMO_TOKEN ]
	"$LCCTL" deployment ls --json | jq -e '.[] | select(.name == "nightly") | .paused'
	"$LCCTL" task cancel "$c"
	"$LCCTL" task cancel "$r"
	wait_state "$c" cancelled
	wait_state "$r" cancelled
}

@test "lcd: cancel a queued and a running task; logs -f streams until the end" {
	a=$("$LCCTL" run -d demo:longrun); b=$("$LCCTL" run -d demo:longrun); c=$("$LCCTL" run -d demo:longrun)
	wait_state "$a" running
	[ "$(state_of "$c")" = queued ]
	"$LCCTL" task cancel "$c"
	[ "$(state_of "$c")" = cancelled ]
	"$LCCTL" task logs "$a" -f >"$T/follow" &
	follower=$!
	for _ in $(seq 50); do grep -q started "$T/follow" && break; sleep 0.1; done
	grep -q started "$T/follow"
	kill -0 "$follower" # still following while the task runs
	"$LCCTL" task cancel "$a"
	wait_state "$a" cancelled
	wait "$follower"
	grep -q "cancelled" "$T/follow"
	run "$LCCTL" task cancel "$a"
	[ "$status" -eq 117 ]
	"$LCCTL" task cancel "$b"
	wait_state "$b" cancelled
	run "$LCCTL" run demo:longrun '{}' --detach
	[ "$status" -eq 0 ]
	"$LCCTL" task cancel "$output"
}

@test "lcd: bad input: manifest errors name the JSON path, bodies are checked, unknowns are 404" {
	run "$LCCTL" deploy "$FIXTURES/bad-timeout.json"
	[ "$status" -eq 121 ]
	[ "$output" = "lcctl: functions.solve.timeout: expected a positive integer" ]
	jq '.schedules.nightly.cron = "0 3 * *"' "$FIXTURES/app.json" >"$T/badcron.json"
	run "$LCCTL" deploy "$T/badcron.json"
	[ "$status" -eq 121 ]
	[[ "$output" == "lcctl: schedules.nightly.cron: bad cron expression '0 3 * *': expected 5 fields"* ]]
	jq '.schedules.nightly.cron = "0 3 * * 9"' "$FIXTURES/app.json" >"$T/badcron.json"
	run "$LCCTL" deploy "$T/badcron.json"
	[[ "$output" == *"day-of-week 9 out of range 0-7"* ]]
	run "$LCCTL" app list --json
	[ "$(echo "$output" | jq length)" -eq 1 ] # nothing half-made
	run api POST /apps '{"name": "x", '
	[ "${lines[1]}" = 400 ]
	[[ "${lines[0]}" == *"malformed JSON"* ]]
	head -c 2000000 /dev/zero | tr '\0' x >"$T/big"
	run curl -s --unix-socket "$LCD_SOCKET" -X POST --data-binary @"$T/big" -w '\n%{http_code}\n' http://lcd/v1/apps
	[ "${lines[1]}" = 413 ]
	run "$LCCTL" run nosuchapp:fn
	[ "$status" -eq 120 ]
	run "$LCCTL" run demo:nosuchfn
	[ "$status" -eq 120 ]
	run api POST /apps/demo/functions/nosuchfn/spawn '{}'
	[ "${lines[1]}" = 404 ]
	run "$LCCTL" run demo:hello 'not json'
	[ "$status" -eq 123 ]
	run "$LCCTL" task show 000000000000
	[ "$status" -eq 120 ]
	run "$LCCTL" frobnicate
	[ "$status" -eq 123 ]
	[ "${#lines[@]}" -eq 1 ]
	run "$LCCTL" --socket "$T/none.sock" status
	[ "$status" -eq 125 ]
	[[ "$output" == "lcctl: cannot reach lcd at $T/none.sock"* ]]
	# the socket is 0660
	[ "$(stat -c %a "$LCD_SOCKET")" = 660 ]
}

@test "lcctl: a bad option or target stops the verb: one line, exit 123, nothing done" {
	run "$LCCTL" map set demo/state k v --bogus
	[ "$status" -eq 123 ]
	[ "$output" = "lcctl: unknown option '--bogus' (see lcctl --help)" ]
	run "$LCCTL" map set demo/state k v --if-absent=1
	[ "$status" -eq 123 ]
	[ "$output" = "lcctl: option --if-absent takes no value" ]
	run "$LCCTL" map get demo/state k
	[ "$status" -eq 120 ] # neither set the key
	run "$LCCTL" secret set S1 --from-env
	[ "$status" -eq 123 ]
	[ "$output" = "lcctl: option --from-env needs a value" ]
	[ -z "$("$LCCTL" secret ls)" ]
	run "$LCCTL" run demo:fail -x
	[ "$status" -eq 123 ]
	[ "$output" = "lcctl: unknown option '-x' (see lcctl --help)" ]
	[ "$(count_fn fail)" -eq 0 ]
	run "$LCCTL" run nocolon
	[ "$status" -eq 123 ]
	[ "$output" = "lcctl: 'nocolon': expected APP:FUNCTION or APP:SCHEDULE" ]
	run "$LCCTL" map get demo k
	[ "$status" -eq 123 ]
	[ "$output" = "lcctl: 'demo': expected APP/MAP" ]
	# what looks like an option but is not one stays an argument
	"$LCCTL" map set demo/state k -5
	[ "$("$LCCTL" map get demo/state k)" = -5 ]
}

@test "lcd: app delete removes the app and everything it owns; redeploy replaces" {
	id=$("$LCCTL" run --json demo:hello | jq -r .id)
	"$LCCTL" map set demo/state k v
	run "$LCCTL" deploy "$FIXTURES/app.json"
	[[ "$output" == "replaced app demo"* ]]
	# redeploy keeps tasks (this one: the 15-minute schedule may have run
	# hello too)
	"$LCCTL" task show "$id" | jq -e '.state == "succeeded"'
	"$LCCTL" app delete demo
	run "$LCCTL" app list --json
	[ "$output" = "[]" ]
	[ "$(count)" -eq 0 ]
	[ "$(lcd_sql 'select count(*) from maps')" -eq 0 ]
	[ -z "$(ls "$LCRUN_ROOT/lcd/logs")" ]
	run "$LCCTL" app delete demo
	[ "$status" -eq 120 ]
}

@test "lcd: tells systemd it is ready; the TCP listener requires the bearer token" {
	stop_lcd
	# READY=1 arrives on $NOTIFY_SOCKET once the API answers.
	socat -u UNIX-RECV:"$T/notify.sock" OPEN:"$T/notify.out",creat,append &
	socat_pid=$!
	for _ in $(seq 50); do [ -S "$T/notify.sock" ] && break; sleep 0.05; done
	NOTIFY_SOCKET="$T/notify.sock" start_lcd
	for _ in $(seq 50); do grep -q READY=1 "$T/notify.out" 2>/dev/null && break; sleep 0.05; done
	grep -qx 'READY=1' "$T/notify.out"
	stop_lcd
	grep -q 'STOPPING=1' "$T/notify.out"
	kill "$socat_pid"; wait "$socat_pid" 2>/dev/null || true

	# TCP only inside a network namespace of this test's own: nothing leaves it.
	ns="lcdbats$$"
	start_lcd_tcp "$ns" 7070
	code=$(ip netns exec "$ns" curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:7070/v1/apps)
	[ "$code" = 401 ]
	code=$(ip netns exec "$ns" curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer wrong-token-wrong" http://127.0.0.1:7070/v1/apps)
	[ "$code" = 401 ]
	out=$(ip netns exec "$ns" curl -s -H "Authorization: Bearer $(cat "$T/token")" http://127.0.0.1:7070/v1/apps)
	[ "$(echo "$out" | jq -r '.apps[0].name')" = demo ]
	stop_lcd
	# A TCP address that cannot be bound (taken) ends lcd at start with one
	# line and exit 125, not a crash, and with nothing of it left running.
	ip netns exec "$ns" socat TCP-LISTEN:7070,bind=127.0.0.1,reuseaddr,fork /dev/null &
	socat_pid=$!
	for _ in $(seq 50); do ip netns exec "$ns" ss -Hltn 'sport = :7070' | grep -q . && break; sleep 0.05; done
	run ip netns exec "$ns" "$LCD" --socket "$LCD_SOCKET" --config "$T/lcd.json"
	kill "$socat_pid"; wait "$socat_pid" 2>/dev/null || true
	[ "$status" -eq 125 ]
	[ "$output" = "lcd: cannot listen on 127.0.0.1:7070" ]
	[ ! -e "$LCD_SOCKET" ]
	echo '{}' >"$T/lcd.json"
	start_lcd
	"$LCCTL" app list --json | jq -e '.[0].name == "demo"'
	stop_lcd
	ip netns del "$ns"
	NS=
	# listen without a token file is refused at start
	printf '{"listen": "127.0.0.1:7070"}\n' >"$T/lcd.json"
	run "$LCD" --socket "$LCD_SOCKET" --config "$T/lcd.json"
	[ "$status" -eq 123 ]
	[[ "$output" == *"needs token_file"* ]]
}

@test "lcd: the TCP listener closes a connection idle or half-sent for listen_idle_timeout, answers calls that outlast it, holds listen_per_ip per address" {
	stop_lcd
	# TCP only inside a network namespace of this test's own: nothing leaves it.
	start_lcd_tcp "lcdtcp$$" 7072 '"listen_idle_timeout": 2, "listen_per_ip": 3'
	run ip netns exec "$NS" python3 "$FIXTURES/tcp-limits.py" 7072 "$(cat "$T/token")" "$LCD_SOCKET"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$output" = "$(printf '%s\n' 'idle: closed' 'half-sent: closed' 'kept-alive request: 200' 'kept-alive, then idle: closed' \
		'exec after 4 s: 200 whole' 'streamed exec after 4 s: 200 streamed exit 0' 'upload paused 4 s: 200' \
		'uploaded: first-last' 'delete: 200' 'fourth connection: closed' 'the three held: 200 200 200' 'after they closed: 200' \
		'unix socket after 3 s idle: HTTP/1.1 200 OK')" ]
	stop_lcd
	# bad values: one line naming the key, nothing started
	for v in 0 '"60"' 86401; do
		printf '{"listen": "127.0.0.1:7072", "token_file": "%s", "listen_idle_timeout": %s}\n' "$T/token" "$v" >"$T/lcd.json"
		run ip netns exec "$NS" "$LCD" --socket "$LCD_SOCKET" --config "$T/lcd.json"
		echo "$output"
		[ "$status" -eq 121 ]
		[[ "$output" == "lcd: config $T/lcd.json: listen_idle_timeout: "* ]]
		[ "${#lines[@]}" -eq 1 ]
		[ ! -e "$LCD_SOCKET" ]
	done
	printf '{"listen": "127.0.0.1:7072", "token_file": "%s", "listen_per_ip": -1}\n' "$T/token" >"$T/lcd.json"
	run ip netns exec "$NS" "$LCD" --socket "$LCD_SOCKET" --config "$T/lcd.json"
	[ "$status" -eq 121 ]
	[ "$output" = "lcd: config $T/lcd.json: listen_per_ip: expected a positive integer" ]
}

@test "lcd: a second lcd on the same state is refused and leaves the first one's tasks alone" {
	id=$("$LCCTL" run -d demo:longrun)
	wait_state "$id" running
	run "$LCD" --socket "$T/other.sock" --config "$T/lcd.json"
	[ "$status" -eq 119 ]
	[[ "$output" == *"another lcd is running on $LCRUN_ROOT"* ]]
	run "$LCD" --socket "$LCD_SOCKET" --config "$T/lcd.json"
	[ "$status" -eq 119 ]
	[ "$(state_of "$id")" = running ]
	"$LCCTL" status
	"$LCCTL" task cancel "$id"
	wait_state "$id" cancelled
}

@test "lcd: an API that cannot start ends lcd with one line, its pool and threads stopped, nothing left running" {
	stop_lcd
	# a TCP address someone else holds, with the pool filling and its threads up
	python3 -c 'import socket, time; s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(60)' >"$T/port" 3>&- &
	holder=$!
	for _ in $(seq 50); do [ -s "$T/port" ] && break; sleep 0.1; done
	port=$(cat "$T/port")
	echo "token-$RANDOM$RANDOM$RANDOM" >"$T/token"
	jq -n --arg l "127.0.0.1:$port" --arg t "$T/token" '{listen: $l, token_file: $t, sandbox_pool: [{image: "host", size: 2}]}' >"$T/busy.json"
	run timeout 60 "$LCD" --socket "$LCD_SOCKET" --config "$T/busy.json"
	kill "$holder"
	echo "$output"
	[ "$status" -ne 0 ] && [ "$status" -ne 124 ]
	[ "$(echo "$output" | grep -c '^lcd: ')" -eq 1 ]
	[[ "$output" == *"lcd: cannot listen on 127.0.0.1:$port"* ]]
	# nothing of it is left: no process carrying its socket, no sandbox, no socket file
	[ -z "$(lcd_procs)" ]
	[ "$("$LCRUN" ps --json | jq length)" -eq 0 ]
	[ ! -e "$LCD_SOCKET" ]
	start_lcd
	"$LCCTL" status
}

@test "lcd: a function's network policy must load at deploy" {
	jq '.functions.hello.net = "no-such-policy"' "$FIXTURES/app.json" >"$T/badnet.json"
	run "$LCCTL" deploy "$T/badnet.json"
	[ "$status" -ne 0 ]
	[[ "$output" == "lcctl: functions.hello.net: "*"no-such-policy"* ]]
	# the app deployed before is unchanged
	"$LCCTL" app show demo | jq -e '.functions.hello.net == null'
}
