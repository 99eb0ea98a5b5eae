# Several lcd nodes on this machine sharing one private PostgreSQL store:
# each node its own LCRUN_ROOT, state directory, operator socket and TCP
# listener (N$i: $T/n$i/…), all the TCP listeners in one network
# namespace the test makes ($CL_NS; node i on 10.77.0.$i:7070), entered with
# nsenter --net (ip netns exec would remount /sys, and with it the cgroups).
#
#   load lcd-lib; load cluster-lib
#   setup() { cluster_setup; node_start 1; node_start 2; … }
#   teardown() { cluster_teardown; }
#   ctl I ARGS…: lcctl against node I;  node_api I METHOD PATH [BODY]

cluster_setup() {
	[ "$(id -u)" = 0 ] || skip "needs root"
	BIN="$(dirname "${LCRUN:-$BATS_TEST_DIRNAME/../../build/lcrun}")"
	LCD="${LCD:-$BIN/lcd}"
	LCCTL="${LCCTL:-$BIN/lcctl}"
	T="$(mktemp -d /tmp/lcd-cluster.XXXXXX)"
	lcd_pg_start
	LCD_DATABASE_NAME="t$BATS_TEST_NUMBER"
	lcd_pg_psql postgres -c "DROP DATABASE IF EXISTS $LCD_DATABASE_NAME" -c "CREATE DATABASE $LCD_DATABASE_NAME"
	LCD_DATABASE="postgresql://lcd@/$LCD_DATABASE_NAME?host=$LCD_PG_DIR&port=5432"
	(umask 077 && openssl rand -hex 32 >"$T/lcd.key")
	echo "cluster-token-$RANDOM$RANDOM$RANDOM$RANDOM" >"$T/token"
	chmod 600 "$T/token"
	CL_NS="lcc-$$-$BATS_TEST_NUMBER"
	ip netns add "$CL_NS"
	ip -n "$CL_NS" link set lo up
	for i in 1 2 3; do ip -n "$CL_NS" addr add "10.77.0.$i/32" dev lo; done
}

cluster_teardown() {
	local i
	for i in 1 2 3; do node_stop "$i"; done
	for i in 1 2 3; do
		[ -d "$T/n$i" ] || continue
		LCRUN_ROOT="$T/n$i/root" LCRUN_STATE_DIR="$T/n$i/state" node_leftovers_remove "$i" || true
	done
	[ -n "${CL_NS:-}" ] && ip netns del "$CL_NS" 2>/dev/null
	lcd_pg_psql postgres -c "DROP DATABASE IF EXISTS $LCD_DATABASE_NAME WITH (FORCE)" || true
	[ -n "${T:-}" ] && rm -rf "$T"
}

node_env() { # I: the environment node I's lcd, lcctl and lcrun use
	echo "LCRUN_ROOT=$T/n$1/root LCRUN_STATE_DIR=$T/n$1/state LCD_SOCKET=$T/n$1/lcd.sock"
}

node_start() { # I [MEMBERS]: node I (MEMBERS: more of lcd.json's, '"k": v, …')
	local i=$1 d="$T/n$1" pid
	mkdir -p "$d"
	printf '{"database": "%s", "secret_key_file": "%s", "node_name": "node%s", "listen": "10.77.0.%s:7070", "token_file": "%s"%s}\n' \
		"$LCD_DATABASE" "$T/lcd.key" "$i" "$i" "$T/token" "${2:+, $2}" >"$d/lcd.json"
	env $(node_env "$i") nsenter --net="/run/netns/$CL_NS" "$LCD" --socket "$d/lcd.sock" --config "$d/lcd.json" >>"$d/lcd.log" 2>&1 &
	pid=$!
	echo "$pid" >"$d/pid"
	for _ in $(seq 200); do
		ctl "$i" status >/dev/null 2>&1 && return 0
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	cat "$d/lcd.log" >&2
	return 1
}

node_pid() { cat "$T/n$1/pid" 2>/dev/null; }

node_stop() { # I: a clean stop (SIGTERM), waited for
	local pid
	pid=$(node_pid "$1")
	[ -n "$pid" ] || return 0
	kill "$pid" 2>/dev/null || true
	for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	kill -9 "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	rm -f "$T/n$1/pid"
}

node_kill() { # I: kill -9
	local pid
	pid=$(node_pid "$1")
	kill -9 "$pid"
	wait "$pid" 2>/dev/null || true
	rm -f "$T/n$1/pid"
}

# What node I's lcd made and left (its sandboxes outlive it by design).
node_leftovers_remove() {
	local id
	for id in $(env $(node_env "$1") "$LCRUN" ps --json 2>/dev/null | jq -r '.[].id' 2>/dev/null); do
		env $(node_env "$1") timeout 20 "$LCRUN" rm -f "$id" >/dev/null 2>&1 || true
	done
}

ctl() { # I ARGS…
	local i=$1
	shift
	env $(node_env "$i") "$LCCTL" "$@"
}

node_api() { # I METHOD PATH [BODY]: the operator socket of node I; body, then the status
	curl -s --unix-socket "$T/n$1/lcd.sock" -X "$2" "http://lcd/v1$3" \
		${4:+-H 'Content-Type: application/json' --data-binary "$4"} -w '\n%{http_code}\n'
}

wait_task() { # I ID STATE [SECONDS]
	for _ in $(seq $(( ${4:-60} * 10 ))); do
		[ "$(ctl "$1" task show "$2" | jq -r .state)" = "$3" ] && return 0
		sleep 0.1
	done
	echo "task $2 is $(ctl "$1" task show "$2" | jq -r .state), not $3" >&2
	return 1
}
