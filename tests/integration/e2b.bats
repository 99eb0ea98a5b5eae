#!/usr/bin/env bats
# lcd's E2B-compatible listener (lcd.json "e2b_listen") as the real e2b SDK
# drives it: the npm package pinned in tests/e2b/package.json (and its
# package-lock.json), installed once from the npm registry into the build
# tree (BUILD/tests/e2b-node, kept between runs), and the checks of
# tests/e2b/checks.cjs, each a user's session with the SDK.  A private lcd
# per test, listening in a network namespace of the test's own (nothing
# leaves it), pointed at by E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY
# as a user would point the SDK at it.  Needs root and Node.js 20.18+.

SRC="$(cd "$BATS_TEST_DIRNAME/../.." && pwd)"
PORT=7391

load helpers
load lcd-lib

setup_file() {
	command -v node >/dev/null && command -v npm >/dev/null || skip "needs node and npm (Node.js 20.18 or later)"
	node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 18) ? 0 : 1)' ||
		skip "the e2b SDK needs Node.js 20.18 or later (this is $(node --version))"
	local build dir
	build="$(cd "$(dirname "$LCRUN")" && pwd)"
	dir="$build/tests/e2b-node"
	if ! cmp -s "$SRC/tests/e2b/package-lock.json" "$dir/package-lock.json" || [ ! -f "$dir/node_modules/e2b/package.json" ]; then
		curl -sf -m 10 -o /dev/null https://registry.npmjs.org/e2b || skip "the npm registry cannot be reached to install the e2b SDK"
		rm -rf "$dir"
		mkdir -p "$dir"
		cp "$SRC/tests/e2b/package.json" "$SRC/tests/e2b/package-lock.json" "$dir/"
		if ! (cd "$dir" && timeout 600 npm ci --no-audit --no-fund --ignore-scripts --loglevel=error) >"$dir/npm.log" 2>&1; then
			cat "$dir/npm.log" >&2
			rm -f "$dir/package-lock.json" # installed again next time
			return 1
		fi
	fi
	export E2B_NODE_PATH="$dir/node_modules"
}

setup() {
	lcd_setup
	LCRUN="${LCRUN:-$BIN/lcrun}"
	# the runtime's files on the disk of /var/lib/lcrun (a snapshot's files
	# keep their owners in its forks), as sandbox-api.bats does
	mkdir -p /var/lib/lcrun/tests
	R=$(mktemp -d /var/lib/lcrun/tests/e2b-bats.XXXXXX)
	export LCRUN_ROOT="$R/root"
	host_snapshot
	start_lcd_e2b "e2b$$" "$PORT"
}

teardown() {
	local rc=0
	stop_lcd
	[ -z "${NS:-}" ] || ip netns del "$NS" 2>/dev/null || true
	if [ -n "${R:-}" ]; then
		lcd_leftovers_remove || rc=1
		"$LCRUN" gc >/dev/null 2>&1 || true
		rm -rf "$R"
	fi
	rmdir /var/lib/lcrun/tests 2>/dev/null || true
	lcd_teardown
	[ ! -f "$BATS_TEST_TMPDIR/host.before" ] || assert_host_clean || rc=1
	return $rc
}

# node with the SDK, in the test's network namespace, pointed at lcd as a
# user points it: E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY.
sdk_env() {
	ip netns exec "$NS" env NODE_PATH="$E2B_NODE_PATH" E2B_API_URL="http://127.0.0.1:$PORT" \
		E2B_SANDBOX_URL="http://127.0.0.1:$PORT" E2B_API_KEY="${E2B_KEY:-$(cat "$T/token")}" "$@"
}

check() { # NAME [ARG]: a check of tests/e2b/checks.cjs; its output on failure
	run sdk_env timeout -k 5 300 node "$SRC/tests/e2b/checks.cjs" "$@"
	echo "$output"
	[ "$status" -eq 0 ]
}

sandboxes() { "$LCRUN" ps --json | jq length; }

map_wait() { # APP KEY: the value, once a task has set it
	for _ in $(seq 300); do
		v=$("$LCCTL" map get "$1/state" "$2" 2>/dev/null) && { echo "$v"; return 0; }
		sleep 0.1
	done
	echo "no $1/state $2 after 30 s" >&2
	return 1
}

@test "e2b: create, commands.run streamed, CommandExitError, envs, cwd, stdin, users" {
	check commands
	[ "$(echo "$output" | grep -c '^ok: ')" -eq 7 ]
	[[ "$output" == *"ok: commands.run streams stdout as it comes"* ]]
	# what the checks made, they killed
	[ "$(sandboxes)" -eq 0 ]
}

@test "e2b: background commands are listed, reconnected to and killed; a command ends at its timeoutMs" {
	check background
	[ "$(echo "$output" | grep -c '^ok: ')" -eq 6 ]
}

@test "e2b: files text and binary, list, exists, makeDir, rename, remove, metadata" {
	check files
	[ "$(echo "$output" | grep -c '^ok: ')" -eq 9 ]
}

@test "e2b: each sandbox's access token reaches its own sandbox only; signed file URLs" {
	check tokens
	[ "$(echo "$output" | grep -c '^ok: ')" -eq 3 ]
	# the tokens are derived from a key of lcd's own, never readable by others
	[ "$(stat -c '%a %U %s' "$LCRUN_ROOT/lcd/e2b.key")" = "600 root 32" ]
}

@test "e2b: Sandbox.list, Sandbox.connect, getInfo, isRunning, kill" {
	check lifecycle
	[ "$(echo "$output" | grep -c '^ok: ')" -eq 5 ]
	[ "$(sandboxes)" -eq 0 ]
}

@test "e2b: a wrong API key is an AuthenticationError; e2b_listen needs token_file" {
	check wrongkey
	[[ "$output" == *"ok: a wrong API key is an AuthenticationError"* ]]
	# a key goes with the listener: lcd does not start without one
	stop_lcd
	printf '{"e2b_listen": "127.0.0.1:%s"}\n' "$PORT" >"$T/lcd.json"
	run "$LCD" --socket "$LCD_SOCKET" --config "$T/lcd.json"
	[ "$status" -ne 0 ]
	[[ "$output" == *"e2b_listen 127.0.0.1:$PORT needs token_file"* ]]
	printf '{"e2b_base_image": "x", "token_file": "%s"}\n' "$T/token" >"$T/lcd.json"
	run "$LCD" --socket "$LCD_SOCKET" --config "$T/lcd.json"
	[ "$status" -ne 0 ]
	[[ "$output" == *"e2b_base_image needs e2b_listen"* ]]
}

@test "e2b: a task's token as the API key reaches its task's sandboxes only, and dies with the task" {
	"$LCCTL" deploy "$SRC/tests/fixtures/lcd/sbapp.json" >/dev/null
	echo "sb-$RANDOM-$RANDOM" | "$LCCTL" secret set SB_SECRET
	op=$(sdk_env node -e '
		require("e2b").Sandbox.create().then((s) => { console.log(s.sandboxId); process.exit(0); },
						     (e) => { console.error(e); process.exit(1); });')
	# a task that publishes its token and holds a sandbox (sandbox-api.bats' "hold")
	t=$("$LCCTL" run --detach sba:py "$(jq -cn --rawfile s "$SRC/tests/fixtures/lcd/sbtask.py" '{mode: "hold", script: $s}')")
	key=$(map_wait sba token)
	held=$(map_wait sba sandbox)
	E2B_KEY=$key check tasktoken "$held" "$op"
	[ "$(echo "$output" | grep -c '^ok: ')" -eq 3 ]
	"$LCCTL" task cancel "$t" >/dev/null
	for _ in $(seq 100); do [ "$("$LCCTL" task show "$t" | jq -r .state)" = cancelled ] && break; sleep 0.1; done
	# the task is over: its token is no key any more, its sandboxes are gone
	E2B_KEY=$key run sdk_env node -e '
		require("e2b").Sandbox.list().nextItems().then(() => process.exit(0),
			(e) => { console.log(e.constructor.name); process.exit(1); });'
	[ "$status" -eq 1 ]
	[ "$output" = AuthenticationError ]
	! "$LCRUN" inspect "$held" >/dev/null 2>&1
	"$LCRUN" inspect "$op" >/dev/null
}

@test "e2b: a sandbox ends at its timeout; setTimeout moves the end" {
	check timeout
	[ "$(echo "$output" | grep -c '^ok: ')" -eq 2 ]
	# gone from the runtime too, not only from what the SDK sees
	[ "$(sandboxes)" -eq 0 ]
}

@test "e2b: pause and connect; fork; snapshots" {
	[ -n "$(cgroup2_root)" ] || skip "pause freezes a sandbox's cgroup: no cgroup v2 hierarchy here"
	check pausefork
	[ "$(echo "$output" | grep -c '^ok: ')" -eq 4 ]
	# the deleted snapshot is gone from lcd's image store
	! "$LCRUN" image ls --json | jq -e '.[] | select(.name | startswith("snapshots/"))'
}

@test "e2b: a terminal (pty) resized; watchDir" {
	check ptywatch
	[ "$(echo "$output" | grep -c '^ok: ')" -eq 3 ]
}

@test "e2b: a template that is an lcd image without bash" {
	[ -x /bin/busybox ] || skip "no /bin/busybox (busybox-static)"
	mkdir -p "$T/bb/bin" "$T/bb/etc"
	cp /bin/busybox "$T/bb/bin/"
	for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -sf busybox "$T/bb/bin/$a"; done
	echo 'root:x:0:0:root:/root:/bin/sh' >"$T/bb/etc/passwd"
	"$LCRUN" image import "$T/bb" --name e2b-busybox >/dev/null
	check nobash e2b-busybox
	[[ "$output" == *"ok: template e2b-busybox: commands run with /bin/sh"* ]]
}

@test "e2b: the processes behind envd's commands and watches hold neither the API key nor the access token" {
	# a command and a watch kept open by a client that waits
	sdk_env node -e '
		const { Sandbox } = require("e2b");
		(async () => {
			const s = await Sandbox.create();
			await s.commands.run("sleep 600", { background: true, timeoutMs: 0 });
			await s.files.watchDir("/tmp", () => {}, { timeoutMs: 0 });
			console.log(s.sandboxId, s.envdAccessToken);
			setTimeout(() => process.exit(0), 120000);
		})().catch((e) => { console.error(e); process.exit(1); });' >"$T/hold.out" 2>&1 &
	node_pid=$!
	for _ in $(seq 300); do [ -s "$T/hold.out" ] && break; sleep 0.1; done
	read -r id token <"$T/hold.out"
	[ "${#token}" -eq 64 ] || { cat "$T/hold.out"; false; }
	runner=$(pgrep -P "$LCD_PID" -x lcd-runner)
	exec_child=$(pgrep -P "$runner" -x lcd-exec)
	watcher=$(pgrep -P "$runner" -x lcd-watch)
	[ -n "$exec_child" ] && [ -n "$watcher" ]
	# the watcher joined the sandbox (its user namespace), the command runs in it
	pid1=$("$LCRUN" inspect "$id" | jq -r .pid)
	[ "$(readlink "/proc/$watcher/ns/user")" = "$(readlink "/proc/$pid1/ns/user")" ]
	for secret in "$(cat "$T/token")" "$token"; do
		held=$(procs_holding "$secret" "$LCD_PID")
		echo "$held"
		# lcd itself only: the runner was forked before lcd read its key
		[ "$(echo "$held" | grep -c '^held ')" -le 1 ]
		! echo "$held" | grep -q '^held ' || echo "$held" | grep -q "^held $LCD_PID lcd$"
		! echo "$held" | grep -q '^unreadable '
		echo "$held" | grep -q "^clean $runner lcd-runner$"
		echo "$held" | grep -q "^clean $exec_child lcd-exec$"
		echo "$held" | grep -q "^clean $watcher lcd-watch$"
		echo "$held" | grep -q "^clean [0-9]* sleep$"
	done
	kill "$node_pid" 2>/dev/null || true
	wait "$node_pid" 2>/dev/null || true
}

@test "e2b: envd works when lcd's runner has gone: lcd makes its files' and commands' processes itself" {
	runner=$(pgrep -P "$LCD_PID" -x lcd-runner)
	kill -9 "$runner"
	for _ in $(seq 100); do [ "$(awk '{print $3}' "/proc/$runner/stat" 2>/dev/null)" = Z ] && break; sleep 0.05; done
	check norunner
	[ "$(echo "$output" | grep -c '^ok: ')" -eq 2 ]
	grep -q "the runner (pid $runner) has gone" "$T/lcd.log"
}

@test "e2b: when lcd stops its commands end; after a restart the same token reaches the sandbox" {
	run sdk_env node -e '
		const { Sandbox } = require("e2b");
		(async () => {
			const s = await Sandbox.create();
			// no timeout; the client goes away with its stream open
			await s.commands.run("sleep 600", { background: true, timeoutMs: 0 });
			console.log(s.sandboxId, s.envdAccessToken);
			process.exit(0);
		})().catch((e) => { console.error(e); process.exit(1); });'
	echo "$output"
	[ "$status" -eq 0 ]
	read -r id token <<<"$output"
	[ "$("$LCRUN" exec "$id" -- sh -c 'pgrep -x sleep >/dev/null && echo running')" = running ]
	stop_lcd
	# the sandbox outlives lcd (an operator's does), the command does not
	[ "$(sandboxes)" -eq 1 ]
	[ "$("$LCRUN" exec "$id" -- sh -c 'pgrep -x sleep || echo gone')" = gone ]
	start_lcd nsenter --net="/run/netns/$NS"
	run sdk_env node -e '
		const { Sandbox } = require("e2b");
		(async () => {
			const s = await Sandbox.connect(process.argv[1]);
			const r = await s.commands.run("echo again");
			console.log(s.envdAccessToken, r.stdout.trim(), (await s.commands.list()).length);
			await s.kill();
		})().catch((e) => { console.error(e); process.exit(1); });' "$id"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$output" = "$token again 0" ]
}
