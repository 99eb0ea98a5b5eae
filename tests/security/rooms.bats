#!/usr/bin/env bats
# Attacks of one app's task on what its grant does not give it, or on
# other apps (lcrun-security(7), "Who may do what"): a wider network than its grant, a
# sandbox from another app's snapshot, an operator's image name taken, no
# limits, the API's connections held, the shared socket's inode changed.
# A task here is a Python function run with lcd's client (its own token,
# its own socket at /run/lcd.sock); a private lcd per test.  Needs root.

load ../integration/helpers
load ../integration/lcd-lib

WEB_NS=lcrw-$$
WEB4=192.0.2.40

setup() {
	lcd_setup
	command -v /usr/bin/python3 >/dev/null || skip "needs /usr/bin/python3"
	mkdir -p /var/lib/lcrun/tests
	R=$(mktemp -d /var/lib/lcrun/tests/rooms-bats.XXXXXX)
	export LCRUN_ROOT="$R/root"
	LCRUN="${LCRUN:-$BIN/lcrun}"
	W=$BATS_TEST_TMPDIR
}

teardown() {
	local rc=0
	stop_lcd
	[ -f "${W:-}/web.pid" ] && kill "$(cat "$W/web.pid")" 2>/dev/null
	ip netns del "$WEB_NS" 2>/dev/null || true
	ip link del lcrw-h 2>/dev/null || true
	if [ -n "${T:-}" ] && [ -d "$T/state" ]; then
		lcd_leftovers_remove || rc=1
		"$LCRUN" gc >/dev/null 2>&1 || true
	fi
	lcd_teardown
	[ -n "${R:-}" ] && rm -rf "$R"
	rmdir /var/lib/lcrun/tests 2>/dev/null || true
	return $rc
}

# app NAME [SANDBOXES-JSON]: an app whose function "py" runs the Python in
# its args' "script", with the given "sandboxes" grant
app() {
	jq -n --arg n "$1" --argjson g "${2:-null}" '{name: $n, functions: {py: {command: ["/usr/bin/python3", "-c",
		"import json; a = json.load(open(\"/run/task/args.json\")); exec(compile(a[\"script\"], \"t.py\", \"exec\"))"],
		timeout: 300, concurrency: 4}}} + (if $g then {sandboxes: $g} else {} end)' >"$W/$1.json"
	"$LCCTL" deploy "$W/$1.json" >/dev/null
}

# run_py APP SCRIPT: run SCRIPT as a task of APP; its result (JSON) on stdout
run_py() {
	local t
	t=$("$LCCTL" run --detach "$1:py" "$(jq -cn --arg s "$2" '{script: $s}')") || return 1
	"$LCCTL" task show "$t" >/dev/null
	for _ in $(seq 1500); do
		st=$("$LCCTL" task show "$t" | jq -r .state)
		case $st in succeeded|failed|timed-out|cancelled) break ;; esac
		sleep 0.2
	done
	if [ "$st" != succeeded ]; then
		echo "task $t of $1 is $st:" >&2
		"$LCCTL" task logs "$t" >&2
	fi
	"$LCCTL" task show "$t" | jq -c .result
}

# A web server at $WEB4:8080 in a network namespace of the test's own,
# routed from the host.
web_up() {
	ip netns add "$WEB_NS"
	ip link add lcrw-h type veth peer name eth0 netns "$WEB_NS"
	ip addr add 198.18.9.1/30 dev lcrw-h
	ip link set lcrw-h up
	ip -n "$WEB_NS" link set lo up
	ip -n "$WEB_NS" link set eth0 up
	ip -n "$WEB_NS" addr add 198.18.9.2/30 dev eth0
	ip -n "$WEB_NS" addr add "$WEB4/32" dev eth0
	ip -n "$WEB_NS" route add default via 198.18.9.1
	ip route add "$WEB4/32" dev lcrw-h
	mkdir -p "$W/www"
	echo "secret page" >"$W/www/index.html"
	ip netns exec "$WEB_NS" /usr/bin/python3 -u -m http.server 8080 --bind "$WEB4" --directory "$W/www" \
		</dev/null >"$W/web.out" 2>"$W/web.err" 3>&- &
	echo $! >"$W/web.pid"
	for _ in $(seq 100); do curl -s -o /dev/null "http://$WEB4:8080/" && return 0; sleep 0.1; done
	echo "the web server did not start: $(cat "$W/web.err")"
	return 1
}

CREATE_PY='
from lcrun_client import Client, LcdError
import json
c = Client()
out = {}
for name, req in json.loads(REQS).items():
    try:
        sb = c.create_sandbox(**req)
        r = sb.run(FETCH) if FETCH else None
        out[name] = ["made", r.stdout.strip() if r else ""]
        sb.destroy()
    except LcdError as e:
        out[name] = [e.status, str(e)]
json.dump(out, open("/run/task/result.json", "w"))
'

create_py() { # REQS-JSON [FETCH-CMD]
	printf 'REQS = %s\nFETCH = %s\n%s' "$(jq -cn --arg r "$1" '$r')" "$(jq -cn --arg f "${2:-}" '$f')" "$CREATE_PY"
}

@test "security/rooms: a task of a function without a network cannot make a sandbox with one" {
	nft list tables >/dev/null 2>&1 || skip "this kernel has no nftables"
	web_up
	start_lcd
	app na
	# an address of this host that no other rule refuses: web_up put it
	# on the host's end of the link to the web server
	hostaddr=198.18.9.1
	res=$(run_py na "$(create_py '{"all": {"net": {"mode": "allow", "allow": [{"cidr": "0.0.0.0/0"}]}},
		"web": {"net": {"mode": "allow", "allow": [{"cidr": "192.0.2.40/32"}]}},
		"open": {"net": "open"}, "openobj": {"net": {"mode": "open"}}}' "curl -s --max-time 3 http://$WEB4:8080/")")
	echo "$res" | jq .
	# before grants, "all" fetched the page
	[ "$(echo "$res" | jq -c '[.all[0], .web[0], .open[0], .openobj[0]]')" = '[403,403,403,403]' ]
	echo "$res" | jq -e '.all[1] | test("sandboxes.net")'
	# an app granted "allow" gives allow lists of public addresses only
	app nb '{"net": ["allow"]}'
	res=$(run_py nb "$(create_py "{\"web\": {\"net\": {\"mode\": \"allow\", \"allow\": [{\"cidr\": \"$WEB4/32\", \"ports\": [8080]}]}},
		\"all\": {\"net\": {\"mode\": \"allow\", \"allow\": [{\"cidr\": \"0.0.0.0/0\"}]}},
		\"pool\": {\"net\": {\"mode\": \"allow\", \"allow\": [{\"cidr\": \"10.200.0.1/32\"}]}},
		\"metadata\": {\"net\": {\"mode\": \"allow\", \"allow\": [{\"cidr\": \"169.254.169.254/32\"}]}},
		\"private\": {\"net\": {\"mode\": \"allow\", \"allow\": [{\"cidr\": \"192.168.1.0/24\"}]}},
		\"host\": {\"net\": {\"mode\": \"allow\", \"allow\": [{\"cidr\": \"$hostaddr/32\"}]}},
		\"ula\": {\"net\": {\"mode\": \"allow\", \"allow\": [{\"cidr\": \"fd00::/8\"}]}},
		\"open\": {\"net\": \"open\"}}" "curl -s --max-time 3 http://$WEB4:8080/")")
	echo "$res" | jq .
	[ "$(echo "$res" | jq -c .web)" = '["made","secret page"]' ]
	[ "$(echo "$res" | jq -c '[.all[0], .pool[0], .metadata[0], .private[0], .host[0], .ula[0], .open[0]]')" = '[403,403,403,403,403,403,403]' ]
	echo "$res" | jq -e '.metadata[1] | test("reaches a private, loopback, link-local, metadata")'
	echo "$res" | jq -e '.host[1] | test("an address of the host itself")'
}

@test "security/rooms: one app's task cannot use another app's snapshot, nor take an operator's image name" {
	start_lcd
	app ia
	app ib
	res=$(run_py ia '
from lcrun_client import Client, LcdError
import json
c = Client()
out = {}
sb = c.create_sandbox()
sb.run("echo from-a > /a-was-here", check=True)
for name in ["ia/snap", "agent-cli", "ib/planted"]:
    try:
        out[name] = sb.snapshot(name)["image"]
    except LcdError as e:
        out[name] = e.status
f = sb.fork(1)
out["fork_image"] = c.request("GET", "/sandboxes/" + f[0].id)["image"]
json.dump(out, open("/run/task/result.json", "w"))
')
	echo "$res" | jq .
	[ "$(echo "$res" | jq -c '[."ia/snap", ."agent-cli", ."ib/planted"]')" = '["ia/snap",403,403]' ]
	echo "$res" | jq -e '.fork_image | startswith("ia/fork-")'
	# B cannot start from A's snapshot (before: it could, and read A's files)
	res=$(run_py ib "$(create_py '{"a": {"image": "ia/snap"}, "op": {"image": "agent-cli"}}' 'cat /a-was-here')")
	echo "$res" | jq .
	[ "$(echo "$res" | jq -c '[.a[0], .op[0]]')" = '[403,403]' ]
	echo "$res" | jq -e '.a[1] | test("sandboxes.images")'
	# A can, and the images are listed with their owner and their end
	res=$(run_py ia "$(create_py '{"a": {"image": "ia/snap"}}' 'cat /a-was-here')")
	[ "$(echo "$res" | jq -c .a)" = '["made","from-a"]' ]
	"$LCCTL" image ls --json | jq .
	"$LCCTL" image ls --json | jq -e '.[] | select(.name == "ia/snap") | .owner == "ia" and .kind == "snapshot" and .expires == null'
	"$LCCTL" image ls --json | jq -e '[.[] | select(.name | startswith("ia/fork-"))][0] | .owner == "ia" and .kind == "fork" and (.expires > now + 6 * 86400)'
	"$LCCTL" image ls | grep -q '^ia/snap  *ia  *snapshot'
	# a task sees its own app's images only
	res=$(run_py ib '
from lcrun_client import Client
import json
json.dump([i["name"] for i in Client().request("GET", "/images")["images"]], open("/run/task/result.json", "w"))
')
	[ "$res" = '[]' ]
}

@test "security/rooms: a task's sandbox gets its app's limits and cannot ask for more, or for none" {
	start_lcd
	app la
	app lb '{"limits": {"memory": "512M", "pids": 256, "cpus": 1}}'
	LIMITS_PY='
from lcrun_client import Client, LcdError
import json
c = Client()
out = {}
for name, lim in {"default": None, "less": {"memory": "256M", "best_effort": True}, "more": {"memory": "1G"}, "pids": {"pids": 100000},
                  "cpus": {"cpus": 4}, "none": {"memory_swap": 0, "best_effort": True}}.items():
    try:
        s = c.create_sandbox(limits=lim) if lim else c.create_sandbox()
        l = c.request("GET", "/sandboxes/" + s.id)["limits"]
        out[name] = [l["memory"], l["pids"], l["cpus"]]
        s.destroy()
    except LcdError as e:
        out[name] = [e.status, str(e)]
json.dump(out, open("/run/task/result.json", "w"))
'
	res=$(run_py lb "$LIMITS_PY")
	echo "$res" | jq .
	[ "$(echo "$res" | jq -c '[.default, .less, .none]')" = '[[536870912,256,1],[268435456,256,1],[536870912,256,1]]' ]
	[ "$(echo "$res" | jq -c '[.more[0], .pids[0], .cpus[0]]')" = '[403,403,403]' ]
	echo "$res" | jq -e '.more[1] | test("limits.memory: 1073741824 is more than app lb")'
	# an app that says nothing: 2 GiB and 1024 pids (before: no limit at all)
	res=$(run_py la "$LIMITS_PY")
	echo "$res" | jq .
	[ "$(echo "$res" | jq -c .default)" = '[2147483648,1024,0]' ]
}

@test "security/rooms: a task's sandbox cannot fill the host's disk: its upper layer has a size, within its grant" {
	[ -e /dev/loop-control ] && command -v mkfs.ext4 >/dev/null || skip "needs loop devices and mkfs.ext4"
	echo '{"task_disk": "64M"}' >"$T/lcd.json"
	start_lcd
	app da
	app db '{"limits": {"disk": "32M"}}'
	DISK_PY='
from lcrun_client import Client, LcdError
import json
c = Client()
out = {}
for name, lim in {"default": None, "less": {"disk": "24M", "best_effort": True}, "more": {"disk": "1G", "best_effort": True},
                  "memory": {"memory": "256M", "best_effort": True}}.items():
    try:
        s = c.create_sandbox(limits=lim) if lim else c.create_sandbox()
        disk = c.request("GET", "/sandboxes/" + s.id)["limits"]["disk"]
        r = s.run("dd if=/dev/zero of=/fill bs=1M count=200 2>&1 | grep -c \"No space left\"; stat -c %s /fill")
        out[name] = [disk] + r.stdout.split()
        s.destroy()
    except LcdError as e:
        out[name] = [e.status, str(e)]
json.dump(out, open("/run/task/result.json", "w"))
'
	# before: the task wrote all 200 MiB onto the host's disk under lcd.db
	res=$(run_py da "$DISK_PY")
	echo "$res" | jq .
	[ "$(echo "$res" | jq -c '[.default[0], .default[1], .memory[0], .more[0]]')" = '[67108864,"1",67108864,403]' ]
	[ "$(echo "$res" | jq '.default[2] | tonumber')" -le $((64 << 20)) ]
	echo "$res" | jq -e '.more[1] | test("limits.disk: 1073741824 is more than app da.s tasks may ask for \\(67108864: sandboxes.limits.disk in its manifest, else lcd.json.s task_disk\\)")'
	# the app's grant names its own: the default and the ceiling
	res=$(run_py db "$DISK_PY")
	echo "$res" | jq .
	[ "$(echo "$res" | jq -c '[.default[0], .default[1], .less[0], .less[1], .more[0]]')" = '[33554432,"1",25165824,"1",403]' ]
	# the operator's sandboxes are as the operator asks: none unless asked
	id=$("$LCCTL" sandbox create)
	[ "$(api GET "/sandboxes/$id" | head -1 | jq .limits.disk)" = 0 ]
	"$LCCTL" sandbox rm "$id" >/dev/null
	id=$("$LCCTL" sandbox create --disk 48M)
	[ "$(api GET "/sandboxes/$id" | head -1 | jq .limits.disk)" = $((48 << 20)) ]
	"$LCCTL" sandbox rm "$id" >/dev/null
	# a bad task_disk is refused in one line, and lcd does not start
	stop_lcd
	echo '{"task_disk": "1M"}' >"$T/lcd.json"
	run "$LCD" --socket "$LCD_SOCKET" --config "$T/lcd.json"
	[ "$status" -ne 0 ]
	[[ "$output" == *'task_disk: expected a size of at least 16M (like "8G"), or 0 for none'* ]]
}

@test "security/rooms: a task holding a thousand connections to lcd takes its share only; others are answered" {
	echo '{"task_connections": 16, "socket_idle_timeout": 3}' >"$T/lcd.json"
	start_lcd
	app ca
	app cb
	t=$("$LCCTL" run --detach ca:py "$(jq -cn --arg s '
import json, socket, time
socks = []
for i in range(1100):
    s = socket.socket(socket.AF_UNIX)
    s.connect("/run/lcd.sock")
    socks.append(s)
def closed(s):
    s.setblocking(False)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
time.sleep(1)
at_once = sum(closed(s) for s in socks)
open("/run/task/holding", "w").write("1")
time.sleep(4)
later = sum(closed(s) for s in socks)
json.dump({"at_once": at_once, "later": later}, open("/run/task/result.json", "w"))
' '{script: $s}')")
	for _ in $(seq 300); do [ -e "$LCRUN_ROOT/lcd/tasks/$t/holding" ] && break; sleep 0.1; done
	[ -e "$LCRUN_ROOT/lcd/tasks/$t/holding" ]
	# while A holds them: B's task and the operator are answered
	res=$(run_py cb '
from lcrun_client import Client
import json
c = Client()
json.dump([c.whoami()["app"] for _ in range(5)], open("/run/task/result.json", "w"))
')
	[ "$res" = '["cb","cb","cb","cb","cb"]' ]
	"$LCCTL" status >/dev/null
	for _ in $(seq 300); do
		[ "$("$LCCTL" task show "$t" | jq -r .state)" = succeeded ] && break
		sleep 0.1
	done
	# past its 16, closed at once; the 16 it held idle, after 3 s
	[ "$("$LCCTL" task show "$t" | jq -c .result)" = '{"at_once":1084,"later":1100}' ]
}

@test "security/rooms: a task's socket is its own: what it does to it is done to itself only" {
	start_lcd
	app sa
	app sbb
	res=$(run_py sa '
import json, os
out = {}
for name, fn in {"chmod": lambda: os.chmod("/run/lcd.sock", 0), "unlink": lambda: os.unlink("/run/lcd.sock"),
                 "chown": lambda: os.chown("/run/lcd.sock", 0, 0)}.items():
    try:
        fn()
        out[name] = "done"
    except OSError as e:
        out[name] = e.errno
json.dump(out, open("/run/task/result.json", "w"))
')
	echo "$res"
	# EROFS, EBUSY, EROFS: a read-only mount point (EPERM, not its owner,
	# would do as well); none of the three done
	[ "$res" = '{"chmod":30,"unlink":16,"chown":30}' ]
	res=$(run_py sbb '
from lcrun_client import Client
import json
json.dump(Client().whoami()["app"], open("/run/task/result.json", "w"))
')
	[ "$res" = '"sbb"' ]
	# another task's token is refused on a task's socket
	ls -l "$LCRUN_ROOT/lcd/sockets"
	[ "$(stat -c %a "$LCRUN_ROOT/lcd/sockets")" = 711 ]
}

@test "security/rooms: uploads past max_upload and exec output past exec_memory_max are refused; the rest is served" {
	echo '{"max_upload": 1048576, "exec_memory_max": 4194304}' >"$T/lcd.json"
	start_lcd
	sb=$("$LCCTL" sandbox create)
	api() { curl -s --unix-socket "$LCD_SOCKET" "$@" -w '\n%{http_code}\n'; }
	head -c 2097152 /dev/zero >"$W/2m"
	head -c 524288 /dev/zero >"$W/half"
	# said to be too big: refused before anything is opened
	run api -X PUT --data-binary @"$W/2m" "http://lcd/v1/sandboxes/$sb/files?path=/big"
	[ "${lines[-1]}" = 413 ]
	echo "${lines[0]}" | jq -e '.error | test("max_upload 1048576")'
	run "$LCCTL" sandbox exec "$sb" -- test -e /big
	[ "$status" -eq 1 ]
	# of no said length: stopped at the limit
	run api -X PUT -H 'Transfer-Encoding: chunked' --data-binary @"$W/2m" "http://lcd/v1/sandboxes/$sb/files?path=/big2"
	[ "${lines[-1]}" = 413 ]
	# within it: served
	run api -X PUT --data-binary @"$W/half" "http://lcd/v1/sandboxes/$sb/files?path=/half"
	[ "${lines[-1]}" = 200 ]
	[ "$("$LCCTL" sandbox exec "$sb" -- stat -c %s /half)" = 524288 ]
	# an exec that may capture 2 x 2 MiB holds all of exec_memory_max while it runs ...
	api -X POST -H 'Content-Type: application/json' -d '{"cmd": "sleep 4", "max_output": 2097152}' \
		"http://lcd/v1/sandboxes/$sb/exec" >"$W/first" &
	first=$!
	sleep 1.5
	# ... so another is refused at once, in one line; a streamed one is served
	run api -X POST -H 'Content-Type: application/json' -d '{"cmd": "echo hi"}' "http://lcd/v1/sandboxes/$sb/exec"
	[ "${lines[-1]}" = 503 ]
	echo "${lines[0]}" | jq -e '.error | test("exec_memory_max")'
	run api -X POST -H 'Content-Type: application/json' -d '{"cmd": "echo streamed"}' "http://lcd/v1/sandboxes/$sb/exec?stream=1"
	[ "${lines[-1]}" = 200 ]
	[[ "$output" == *streamed* ]]
	wait "$first"
	[ "$(tail -1 "$W/first")" = 200 ]
	# and once it is done, the next is served
	run api -X POST -H 'Content-Type: application/json' -d '{"cmd": "echo hi"}' "http://lcd/v1/sandboxes/$sb/exec"
	[ "${lines[-1]}" = 200 ]
	"$LCCTL" sandbox rm "$sb"
}

# What each process lcd started holds of lcd's own, past its stdio: its
# database, log and lock files, its listening sockets (by inode).  Prints
# "PID PATH" lines.
lcd_fds_held() {
	local lcd=$1 inodes p
	inodes=$(ss -xlpH | awk -v p="pid=$lcd," 'index($0, p) { print $6 }' | sort -u)
	for p in $(ps -eo pid= | tr -d ' '); do
		[ "$p" = "$lcd" ] && continue
		[ -d "/proc/$p/fd" ] || continue
		# lcd's own descendants, and the forks of it that outlive it
		grep -qsF -- "$LCD_SOCKET" "/proc/$p/cmdline" || pstree -p "$lcd" 2>/dev/null | grep -q "($p)" || continue
		for f in /proc/"$p"/fd/*; do
			# stdio is lcd's log, which its helpers write to by design
			case ${f##*/} in 0|1|2) continue ;; esac
			t=$(readlink "$f" 2>/dev/null) || continue
			case $t in
			"$LCRUN_ROOT"/lcd.db*|"$T"/lcd.log|"$LCRUN_ROOT"/lcd/lock) echo "$p $t" ;;
			socket:\[*\])
				i=${t#socket:[}; i=${i%]}
				echo "$inodes" | grep -qx "$i" && echo "$p $t (a listening socket of lcd's)"
				;;
			esac
		done
	done
	true
}

@test "security/rooms: no process lcd starts holds lcd's database, log, lock or listening sockets, runner or not" {
	command -v pstree >/dev/null || skip "needs pstree"
	start_lcd
	app fa
	sb=$("$LCCTL" sandbox create)
	"$LCCTL" sandbox exec "$sb" -- true
	t=$("$LCCTL" run --detach fa:py "$(jq -cn --arg s 'import time; time.sleep(30)' '{script: $s}')")
	for _ in $(seq 100); do [ "$("$LCCTL" task show "$t" | jq -r .state)" = running ] && break; sleep 0.1; done
	sleep 1
	held=$(lcd_fds_held "$LCD_PID")
	echo "$held"
	[ -z "$held" ]
	# the runner gone: lcd forks the sandboxes' makers itself
	kill -9 "$(pgrep -P "$LCD_PID" -x lcd-runner)"
	sleep 0.5
	sb2=$("$LCCTL" sandbox create)
	"$LCCTL" sandbox exec "$sb2" -- true
	t2=$("$LCCTL" run --detach fa:py "$(jq -cn --arg s 'import time; time.sleep(30)' '{script: $s}')")
	for _ in $(seq 100); do [ "$("$LCCTL" task show "$t2" | jq -r .state)" = running ] && break; sleep 0.1; done
	sleep 1
	held=$(lcd_fds_held "$LCD_PID")
	echo "$held"
	[ -z "$held" ]
	"$LCCTL" task cancel "$t" >/dev/null || true
	"$LCCTL" task cancel "$t2" >/dev/null || true
	"$LCCTL" sandbox rm "$sb"
	"$LCCTL" sandbox rm "$sb2"
}
