# A private lcd for a bats file (temp LCRUN_ROOT, LCRUN_STATE_DIR and
# socket; its config in $T/lcd.json), and helpers to drive it.  Needs root.
#
#   load lcd-lib
#   setup() { lcd_setup; start_lcd; … }     teardown() { lcd_teardown; }
#
# LCD_TEST_DB=postgresql: the lcds keep their state in PostgreSQL instead
# of lcd.db: a private cluster per bats file (tests/pg-cluster, started by
# the file's first lcd_setup, stopped by teardown_file: a file with a
# teardown_file of its own calls lcd_pg_stop there), a database of its own
# per test.  Tests read the store with lcd_sql, whichever it is.

lcd_setup() {
	[ "$(id -u)" = 0 ] || skip "needs root"
	BIN="$(dirname "${LCRUN:-$BATS_TEST_DIRNAME/../../build/lcrun}")"
	LCD="${LCD:-$BIN/lcd}"
	LCCTL="${LCCTL:-$BIN/lcctl}"
	T="$(mktemp -d /tmp/lcd-bats.XXXXXX)"
	export LCRUN_ROOT="$T/root" LCRUN_STATE_DIR="$T/state"
	export LCD_SOCKET="$T/lcd.sock"
	LCD_DATABASE=
	if [ "${LCD_TEST_DB:-sqlite}" = postgresql ]; then
		lcd_pg_start
		LCD_DATABASE_NAME="t$BATS_TEST_NUMBER"
		lcd_pg_psql postgres -c "DROP DATABASE IF EXISTS $LCD_DATABASE_NAME" -c "CREATE DATABASE $LCD_DATABASE_NAME"
		LCD_DATABASE="postgresql://lcd@/$LCD_DATABASE_NAME?host=$LCD_PG_DIR&port=5432"
	fi
}

lcd_teardown() {
	stop_lcd
	if [ -n "${LCD_DATABASE:-}" ]; then
		lcd_pg_psql postgres -c "DROP DATABASE IF EXISTS $LCD_DATABASE_NAME WITH (FORCE)" || true
	fi
	[ -n "${T:-}" ] && rm -rf "$T"
}

# ---- the store, SQLite's or PostgreSQL's ----
# The cluster's directory: one per file, outside bats' own temp dirs (the
# postgres user, who runs it, cannot reach those); its name is kept there.
lcd_pg_dir() {
	local rec="$BATS_FILE_TMPDIR/lcd-pg-dir"
	[ -s "$rec" ] || mktemp -d /tmp/lcd-pg.XXXXXX >"$rec"
	LCD_PG_DIR=$(cat "$rec")
}
lcd_pg_start() {
	compgen -G "${PGBIN:-/usr/lib/postgresql/*/bin}/initdb" >/dev/null ||
		skip "no PostgreSQL server (the postgresql package)"
	lcd_pg_dir
	[ -f "$LCD_PG_DIR/data/postmaster.pid" ] && return 0
	"$BATS_TEST_DIRNAME/../pg-cluster" start "$LCD_PG_DIR" >/dev/null
}
lcd_pg_stop() {
	[ -s "$BATS_FILE_TMPDIR/lcd-pg-dir" ] || return 0
	lcd_pg_dir
	"$BATS_TEST_DIRNAME/../pg-cluster" stop "$LCD_PG_DIR"
	rm -rf "$LCD_PG_DIR" "$BATS_FILE_TMPDIR/lcd-pg-dir"
}
teardown_file() { lcd_pg_stop; }
lcd_pg_psql() { # DB ARGS…
	local db=$1
	shift
	PGOPTIONS='-c client_min_messages=warning' psql -X -q -v ON_ERROR_STOP=1 -h "$LCD_PG_DIR" -p 5432 -U lcd -d "$db" "$@"
}
lcd_sql() { # SQL: the rows as sqlite3 prints them (columns joined by |)
	if [ -n "${LCD_DATABASE:-}" ]; then
		lcd_pg_psql "$LCD_DATABASE_NAME" -At -F '|' -c "$1"
	else
		sqlite3 "$LCRUN_ROOT/lcd.db" "$1"
	fi
}
lcd_sql_json() { # SQL: the rows as a JSON array of objects
	if [ -n "${LCD_DATABASE:-}" ]; then
		lcd_pg_psql "$LCD_DATABASE_NAME" -At -c "SELECT coalesce(json_agg(q), '[]') FROM ($1) q"
	else
		sqlite3 -json "$LCRUN_ROOT/lcd.db" "$1"
	fi
}
lcd_sql_dump() { # TABLE: every row, every column, as text
	if [ -n "${LCD_DATABASE:-}" ]; then
		lcd_pg_psql "$LCD_DATABASE_NAME" -At -c "SELECT * FROM $1"
	else
		sqlite3 "$LCRUN_ROOT/lcd.db" ".dump $1"
	fi
}
lcd_store_forget() { # the store emptied (lcd stopped): the next lcd starts afresh
	if [ -n "${LCD_DATABASE:-}" ]; then
		lcd_pg_psql postgres -c "DROP DATABASE IF EXISTS $LCD_DATABASE_NAME WITH (FORCE)" \
			-c "CREATE DATABASE $LCD_DATABASE_NAME"
	else
		rm -f "$LCRUN_ROOT/lcd.db"*
	fi
}

start_lcd() { # [PREFIX…]: e.g. ip netns exec NS
	[ -f "$T/lcd.json" ] || echo '{}' >"$T/lcd.json" # not the host's /etc/lcrun/lcd.json
	if [ -n "${LCD_DATABASE:-}" ]; then
		[ -s "$T/lcd.key" ] || (umask 077 && openssl rand -hex 32 >"$T/lcd.key")
		jq --arg db "$LCD_DATABASE" --arg key "$T/lcd.key" '.database = $db | .secret_key_file //= $key' \
			"$T/lcd.json" >"$T/lcd.json.new"
		mv "$T/lcd.json.new" "$T/lcd.json"
	fi
	"$@" "$LCD" --socket "$LCD_SOCKET" --config "$T/lcd.json" ${CLOCK:+--clock-file "$CLOCK"} \
		>>"$T/lcd.log" 2>&1 &
	LCD_PID=$!
	for _ in $(seq 100); do
		"$LCCTL" status >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	cat "$T/lcd.log" >&2
	return 1
}

stop_lcd() {
	[ -n "${LCD_PID:-}" ] || return 0
	kill "$LCD_PID" 2>/dev/null || true
	for _ in $(seq 300); do kill -0 "$LCD_PID" 2>/dev/null || break; sleep 0.1; done
	kill -9 "$LCD_PID" 2>/dev/null || true
	wait "$LCD_PID" 2>/dev/null || true
	LCD_PID=
}

# After stop_lcd, what the test's lcd made must go before the host is
# compared: the sandboxes it made outlive it by design, and a sandbox whose
# make was under way when lcd stopped is listed (and then removed) only
# once its monitor has finished making it.  So: remove what `lcrun ps`
# lists, until no process of this lcd is left (the runner's children and
# the sandboxes' monitors are forks of lcd: they carry its command line;
# the removers retitle themselves, lcrun-rm and lcrun-net, and are
# host_snapshot's and net_settle's to wait for), 30 s at most in all;
# then say which are left.
lcd_leftovers_remove() {
	local id left= end=$((SECONDS + 30))
	while :; do
		for id in $("$LCRUN" ps --json 2>/dev/null | jq -r '.[].id' 2>/dev/null); do
			[ "$SECONDS" -lt "$end" ] || break
			timeout "$((end - SECONDS + 1))" "$LCRUN" rm -f "$id" >/dev/null 2>&1 || true
		done
		left=$(lcd_procs)
		[ -z "$left" ] && return 0
		[ "$SECONDS" -lt "$end" ] || break
		sleep 0.5
	done
	echo "still running 30 s after lcd stopped and its sandboxes were removed:" >&2
	echo "$left" >&2
	return 1
}

lcd_procs() { # the processes (not zombies) whose command line names $LCD_SOCKET
	ps -eo pid=,stat=,comm=,args= | awk -v s="--socket $LCD_SOCKET " '$2 !~ /^Z/ && $3 ~ /^(lcd|lcrun)/ && index($0 " ", s)'
}

start_lcd_tcp() { # NS PORT [MEMBERS]: lcd also on TCP 127.0.0.1:PORT with the token in
	# $T/token (and MEMBERS, more of lcd.json's: '"k": v, …'), inside a network
	# namespace NS of the test's own: nothing leaves it (the teardown deletes $NS)
	NS="$1"
	ip netns add "$NS"
	ip -n "$NS" link set lo up
	echo "bats-token-$RANDOM$RANDOM$RANDOM" >"$T/token"
	printf '{"listen": "127.0.0.1:%s", "token_file": "%s"%s}\n' "$2" "$T/token" "${3:+, $3}" >"$T/lcd.json"
	start_lcd ip netns exec "$NS"
}

start_lcd_e2b() { # NS PORT [MEMBERS]: lcd's E2B listener on 127.0.0.1:PORT, the API key
	# (token_file) in $T/token, inside a network namespace NS of the test's own
	# (nothing leaves it; the teardown deletes $NS).  lcd enters only that
	# network namespace (nsenter, not ip netns exec, which also mounts a /sys
	# of its own): its sandboxes keep the host's cgroups, which pause needs.
	NS="$1"
	ip netns add "$NS"
	ip -n "$NS" link set lo up
	echo "bats-e2b-key-$RANDOM$RANDOM$RANDOM" >"$T/token"
	printf '{"e2b_listen": "127.0.0.1:%s", "token_file": "%s"%s}\n' "$2" "$T/token" "${3:+, $3}" >"$T/lcd.json"
	start_lcd nsenter --net="/run/netns/$NS"
}

api() { # METHOD PATH [BODY]: prints the body, then the status on its own line
	curl -s --unix-socket "$LCD_SOCKET" -X "$1" "http://lcd/v1$2" ${3:+-H 'Content-Type: application/json' --data-binary "$3"} \
		-w '\n%{http_code}\n'
}

state_of() { "$LCCTL" task show "$1" | jq -r .state; }

wait_state() { # ID STATE [SECONDS]
	for _ in $(seq $(( ${3:-30} * 10 ))); do
		[ "$(state_of "$1")" = "$2" ] && return 0
		sleep 0.1
	done
	echo "task $1 is $(state_of "$1"), not $2" >&2
	return 1
}

count() { # ARGS for task list: how many tasks
	"$LCCTL" task list --json "$@" | jq length
}

# Does procs_holding find TEXT where it is?  In a process made to hold it
# (in its environment, not on its command line).
probe_works() { # TEXT
	local decoy out
	(
		export LCD_PROBE_DECOY="$1"
		exec sleep 600
	) &
	decoy=$!
	for _ in $(seq 100); do [ "$(cat "/proc/$decoy/comm" 2>/dev/null)" = sleep ] && break; sleep 0.05; done
	out=$(procs_holding "$1" "$decoy")
	kill "$decoy"
	wait "$decoy" 2>/dev/null || true
	[ "$out" = "held $decoy sleep" ]
}

# What each process under the PIDs (the PIDs too) holds: "held PID NAME"
# when TEXT is in its memory, "clean PID NAME" when not, "unreadable PID
# NAME" when its memory could not be read (a process that ends meanwhile
# is left out).  Root reads them through /proc/PID/mem.
procs_holding() { # TEXT PID…
	python3 - "$@" <<'PY'
import errno, os, re, sys
needle, tops = sys.argv[1].encode(), [int(p) for p in sys.argv[2:]]
kids = {}
for p in filter(str.isdigit, os.listdir("/proc")):
    try:
        ppid = int(open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError):
        continue
    kids.setdefault(ppid, []).append(int(p))
todo, seen = list(tops), []
while todo:
    p = todo.pop()
    if p not in seen:
        seen.append(p)
        todo += kids.get(p, [])
for p in seen:
    try:
        name = open(f"/proc/{p}/comm").read().strip()
        maps, mem = open(f"/proc/{p}/maps").read(), open(f"/proc/{p}/mem", "rb", 0)
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ESRCH):
            continue
        print("unreadable", p, e.strerror)
        continue
    found = False
    for m in re.finditer(r"^([0-9a-f]+)-([0-9a-f]+) r", maps, re.M):
        a, b = int(m[1], 16), int(m[2], 16)
        try:
            mem.seek(a)
            if needle in mem.read(b - a):
                found = True
                break
        except (OSError, OverflowError, ValueError):
            pass  # a region with no pages behind it ([vvar], guard pages)
    print("held" if found else "clean", p, name)
PY
}
