# What the coding-agents app's test files share (coding-agents.bats,
# eval.bats): the agent-cli image in a store of the file's own, a private
# lcd per test on it, the repo snapshot the file's setup_file made.
#
#   load agents-lib
#   setup_file() { …; agents_file_store || return 0; …; }
#   setup() { …; file_world_setup; … }   teardown() { world_teardown; … }

# The agent-cli image, built in the shared store (cached), copied into this
# file's private store ($BATS_FILE_TMPDIR/root, exported as LCRUN_ROOT)
# once.  Fails (and need_agent_image skips, saying why) where it cannot be.
agents_file_store() {
	local F=$BATS_FILE_TMPDIR out
	if ! out=$(env -u LCRUN_ROOT timeout -k 2 1800 "$LCRUN" image build "$BATS_TEST_DIRNAME/../../images/agent-cli.json" 2>&1); then
		echo "the agent-cli image cannot be built here: $(echo "$out" | tail -1)" >"$F/agent-cli.skip"
	fi
	export LCRUN_ROOT=$F/root
	mkdir -p -m 0700 "$LCRUN_ROOT"
	if [ ! -f "$F/agent-cli.skip" ]; then
		if env -u LCRUN_ROOT "$LCRUN" image export agent-cli | "$LCRUN" image import --trusted - >/dev/null 2>"$F/import.err"; then
			touch "$F/agent-cli.ok"
		else
			echo "cannot copy agent-cli into the test's store: $(tail -1 "$F/import.err")" >"$F/agent-cli.skip"
		fi
	fi
	[ -f "$F/agent-cli.ok" ]
}

teardown_file() {
	[ -n "${BATS_FILE_TMPDIR:-}" ] && rm -rf "$BATS_FILE_TMPDIR/root"
	! declare -F lcd_pg_stop >/dev/null || lcd_pg_stop
	true
}

need_agent_image() {
	[ -f "$BATS_FILE_TMPDIR/agent-cli.ok" ] || skip "$(cat "$BATS_FILE_TMPDIR/agent-cli.skip" 2>/dev/null || echo 'no agent-cli image')"
}

# The shared repo snapshot's record, as the repo-builder wrote it.
use_snapshot() {
	[ -s "$BATS_FILE_TMPDIR/snapshot.json" ] || skip "$(cat "$BATS_FILE_TMPDIR/snapshot.skip" 2>/dev/null || echo 'no repo snapshot')"
	"$LCCTL" map set coding-agents/coding-agents snapshot "$(cat "$BATS_FILE_TMPDIR/snapshot.json")" >/dev/null
}

tasks() { # [FUNCTION]: the app's tasks as JSON (all, or one function's)
	"$LCCTL" task list --app coding-agents --json | jq -c --arg f "${1:-}" '[.[] | select($f == "" or .function == $f)]'
}

# Per test: a private lcd (its own lcd.db, the file's image store).
file_world_setup() {
	WORKLOADS=$(cd "$(dirname "$LCRUN")/orchestrator/workloads" && pwd)
	T=$(mktemp -d /tmp/lcd-bats.XXXXXX)
	export LCRUN_STATE_DIR=$T/state LCD_SOCKET=$T/lcd.sock LCRUN_ETC_DIR=$T/etc
	BIN=$(dirname "$LCRUN")
	LCD=$BIN/lcd
	LCCTL=$BIN/lcctl
}

world_teardown() {
	# A test that failed half-way may leave its app's sandboxes (e.g.
	# still being made): remove them, through lcd and then the runtime,
	# so that nothing of this test reaches the next one.
	local id
	if [ -n "${LCD_PID:-}" ]; then
		for id in $("$LCCTL" sandbox ls --json 2>/dev/null | jq -r '.[].id' 2>/dev/null); do
			timeout 30 "$LCCTL" sandbox rm "$id" >/dev/null 2>&1 || true
		done
	fi
	stop_lcd
	local rc=0 f
	[ -z "${LCD_SOCKET:-}" ] || lcd_leftovers_remove || rc=1
	for f in "$BATS_TEST_TMPDIR"/*.pid; do
		[ -e "$f" ] && dbl_stop "$(basename "$f" .pid)"
	done
	dbl_netns_down
	rm -rf "$LCRUN_ROOT/lcd.db" "$LCRUN_ROOT/lcd.db-wal" "$LCRUN_ROOT/lcd.db-shm" "$LCRUN_ROOT/lcd"
	[ -n "${T:-}" ] && rm -rf "$T"
	return $rc
}
