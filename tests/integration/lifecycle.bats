#!/usr/bin/env bats
bats_require_minimum_version 1.5.0
# Long-lived sandboxes: create, exec, cp, pause/resume, stop/start, rm, ttl,
# idle timeout, gc.  Run as root.  Every test removes its sandboxes.

load helpers

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root"
	SANDBOXES=()
}

teardown() {
	for s in "${SANDBOXES[@]}"; do
		"$LCRUN" rm -f "$s" >/dev/null 2>&1 || true
	done
}

# create and remember the sandbox for teardown; its id in $SB
new_sandbox() {
	SB=$("$LCRUN" create "$@")
	[ -n "$SB" ]
	SANDBOXES+=("$SB")
}

state_of() {
	"$LCRUN" inspect "$1" | jq -r .status
}

# fail when the command succeeds (a bare `! cmd` never fails a bats test)
refute() {
	if "$@"; then false; fi
}

# wait up to $1 seconds for "$2..." to succeed
wait_for() {
	local t=$1
	shift
	for _ in $(seq 1 $((t * 10))); do
		"$@" && return 0
		sleep 0.1
	done
	return 1
}

@test "edit-test loop: create, cp a project in, exec build and tests, cp the result out" {
	new_sandbox --name "loop-$$"
	local proj="$BATS_TEST_TMPDIR/proj"
	mkdir -p "$proj/src"
	printf 'hello\nworld\n' > "$proj/src/words.txt"
	cat > "$proj/build.sh" <<-'EOF'
		#!/bin/sh
		set -e
		mkdir -p out
		tr a-z A-Z < src/words.txt > out/WORDS.txt
		wc -l < src/words.txt > out/count
	EOF
	cat > "$proj/test.sh" <<-'EOF'
		#!/bin/sh
		[ "$(cat out/count)" = 2 ] && grep -qx HELLO out/WORDS.txt && echo "tests passed"
	EOF
	chmod +x "$proj"/*.sh
	run "$LCRUN" cp "$proj" "loop-$$:/work"
	[ "$status" -eq 0 ]
	run "$LCRUN" exec -w /work "loop-$$" -- ./build.sh
	[ "$status" -eq 0 ]
	run "$LCRUN" exec -w /work "loop-$$" -- ./test.sh
	[ "$status" -eq 0 ]
	[ "$output" = "tests passed" ]
	# an edit in the sandbox, the tests fail, exit code passes through
	"$LCRUN" exec "loop-$$" -- sh -c 'echo x >> /work/src/words.txt'
	"$LCRUN" exec -w /work "loop-$$" -- ./build.sh
	run "$LCRUN" exec -w /work "loop-$$" -- ./test.sh
	[ "$status" -eq 1 ]
	run "$LCRUN" cp "loop-$$:/work/out" "$BATS_TEST_TMPDIR/result"
	[ "$status" -eq 0 ]
	[ "$(cat "$BATS_TEST_TMPDIR/result/count")" = 3 ]
	[ "$(head -1 "$BATS_TEST_TMPDIR/result/WORDS.txt")" = HELLO ]
	# files copied in belong to the sandbox's user, not to nobody
	run "$LCRUN" exec "loop-$$" -- stat -c %u:%g /work/build.sh
	[ "$output" = "0:0" ]
}

@test "100 execs, 10 at a time, into one sandbox: right exit codes, no zombie" {
	new_sandbox
	seq 1 100 | xargs -P10 -I{} sh -c '"$0" exec "$1" -- sh -c "exit $(({} % 9))"; echo "{} $?"' \
		"$LCRUN" "$SB" > "$BATS_TEST_TMPDIR/codes"
	[ "$(wc -l < "$BATS_TEST_TMPDIR/codes")" -eq 100 ]
	while read -r n code; do
		[ "$code" -eq $((n % 9)) ] || { echo "exec $n exited $code" >&2; false; }
	done < "$BATS_TEST_TMPDIR/codes"
	run "$LCRUN" exec "$SB" -- ps -eo stat=,comm=
	[ "$status" -eq 0 ]
	refute grep -q '^Z' <<< "$output"
	# only its init and that ps (with its exec helper) are left in the sandbox
	[ -z "$(grep -v -e ' lcrun-init$' -e ' lcrun-exec$' -e ' ps$' <<< "$output")" ]
	[ "$(wc -l <<< "$output")" -eq 3 ]
	# no zombie waits for the sandbox's monitor or its pid 1 on the host
	local mon pid1
	mon=$("$LCRUN" inspect "$SB" | jq -r .monitor_pid)
	pid1=$("$LCRUN" inspect "$SB" | jq -r .pid)
	refute bash -c "ps -eo stat=,ppid= | awk '\$1 ~ /^Z/ && (\$2 == $mon || \$2 == $pid1)' | grep -q ."
}

@test "exec: exit codes, signals, stdin with -i, env, workdir, user, timeout" {
	new_sandbox
	run "$LCRUN" exec "$SB" -- sh -c 'kill -TERM $$'
	[ "$status" -eq 143 ]
	run -127 "$LCRUN" exec "$SB" -- /nonexistent
	[ "${#lines[@]}" -eq 1 ]
	run -126 "$LCRUN" exec "$SB" -- /etc/hostname
	run bash -c 'echo piped | "$0" exec -i "$1" -- cat' "$LCRUN" "$SB"
	[ "$output" = piped ]
	run bash -c 'echo piped | "$0" exec "$1" -- cat' "$LCRUN" "$SB"
	[ "$output" = "" ]
	run "$LCRUN" exec -e FOO=bar -w /tmp -u 1000:1000 "$SB" -- sh -c 'echo $FOO $(pwd) $(id -u):$(id -g)'
	[ "$output" = "bar /tmp 1000:1000" ]
	run "$LCRUN" exec --timeout 1 "$SB" -- sleep 30
	[ "$status" -eq 124 ]
	# kill -9 of lcrun exec takes its command along (here as another user)
	"$LCRUN" exec -u 1000 "$SB" -- sleep 100 &
	local ex=$!
	wait_for 5 bash -c '"$0" exec "$1" -- pgrep -x sleep >/dev/null' "$LCRUN" "$SB"
	kill -9 "$ex"
	wait_for 5 bash -c '! "$0" exec "$1" -- pgrep -x sleep >/dev/null' "$LCRUN" "$SB"
	# the sandbox's seccomp profile and no_new_privs hold in exec too
	run "$LCRUN" exec "$SB" -- sh -c 'grep -E "^(NoNewPrivs|Seccomp):" /proc/self/status'
	[[ "$output" == *"NoNewPrivs:	1"* ]]
	[[ "$output" == *"Seccomp:	2"* ]]
}

@test "exec gets the seccomp filter the sandbox was created with, not the profile as edited since" {
	local p=$BATS_TEST_TMPDIR/profile.json
	echo '{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]}' >"$p"
	new_sandbox --seccomp "$p"
	run "$LCRUN" exec "$SB" -- mkdir /tmp/a
	[ "$status" -eq 1 ]
	[[ "$output" == *"Operation not permitted"* ]]
	# the profile on disk now allows mkdir: the running sandbox's execs still may not
	echo '{"defaultAction": "SCMP_ACT_ALLOW"}' >"$p"
	run "$LCRUN" exec "$SB" -- mkdir /tmp/b
	[ "$status" -eq 1 ]
	[[ "$output" == *"Operation not permitted"* ]]
	local first=$SB
	# a sandbox created now gets the edited profile
	new_sandbox --seccomp "$p"
	run "$LCRUN" exec "$SB" -- mkdir /tmp/c
	[ "$status" -eq 0 ]
	# a sandbox made before exec had its own copy still gets a filter (from the profile)
	rm "$LCRUN_RUN/$first/seccomp.bpf"
	run "$LCRUN" exec "$first" -- grep '^Seccomp:' /proc/self/status
	[ "$output" = "Seccomp:	2" ]
	# unconfined at create, unconfined in exec
	new_sandbox --seccomp unconfined
	run "$LCRUN" exec "$SB" -- grep '^Seccomp:' /proc/self/status
	[ "$output" = "Seccomp:	0" ]
}

@test "HOME, USER and LOGNAME come from the sandbox's /etc/passwd unless given (run, create, exec)" {
	run "$LCRUN" run -- sh -c 'echo "$HOME|$USER|$LOGNAME"'
	[ "$output" = "/root|root|root" ]
	# the host image writes a passwd line for a user of its own
	run "$LCRUN" run --user 1234:1234 -- sh -c 'echo "$HOME|$USER|$LOGNAME"'
	[ "$output" = "/home/user|user|user" ]
	run "$LCRUN" run --user 1234 -e HOME=/tmp -e USER=me -- sh -c 'echo "$HOME|$USER|$LOGNAME"'
	[ "$output" = "/tmp|me|user" ]
	new_sandbox
	# a line the sandbox wrote itself counts, in exec
	"$LCRUN" exec "$SB" -- sh -c 'mkdir -p /home/dev && cp /etc/passwd /tmp/p && { grep -v "^nobody" /tmp/p; echo "dev:x:2000:2000::/home/dev:/bin/sh"; } >/etc/passwd'
	run "$LCRUN" exec -u 2000:2000 "$SB" -- sh -c 'echo "$HOME|$USER|$LOGNAME"'
	[ "$output" = "/home/dev|dev|dev" ]
	run "$LCRUN" exec -u 2000:2000 -e HOME=/x "$SB" -- sh -c 'echo "$HOME|$USER"'
	[ "$output" = "/x|dev" ]
	run "$LCRUN" exec -u 3000 "$SB" -- sh -c 'echo "$HOME|${USER-unset}|${LOGNAME-unset}"'
	[ "$output" = "/home/user|unset|unset" ]
	run "$LCRUN" exec "$SB" -- sh -c 'echo "$HOME|$USER"'
	[ "$output" = "/root|root" ]
}

@test "exec -t: a pts, the window size, Ctrl-C stops the command and not the sandbox" {
	command -v script >/dev/null || skip "script(1) is not installed"
	new_sandbox
	run script -qec "stty rows 33 cols 77; '$LCRUN' exec -t '$SB' -- sh -c 'tty; stty size'" /dev/null
	[ "$status" -eq 0 ]
	[[ "$output" == *"/dev/pts/"* ]]
	[[ "$output" == *"33 77"* ]]
	# typed input reaches an interactive shell, even when typed ahead
	run bash -c 'printf "echo typed-\$((6*7))\nexit 3\n" | timeout 20 script -qec "\"$0\" exec -t \"$1\" -- sh" /dev/null' "$LCRUN" "$SB"
	[ "$status" -eq 3 ]
	[[ "$output" == *typed-42* ]]
	# resize while it runs
	run script -qec "stty rows 33 cols 77; '$LCRUN' exec -t '$SB' -- sh -c 'sleep 1.5; stty size' & sleep 0.7; stty rows 50 cols 120; wait" /dev/null < /dev/null
	[[ "$output" == *"50 120"* ]]
	# ^C typed on the terminal reaches the command (130), lcrun survives to report it
	run bash -c '{ sleep 1.5; printf "\003"; sleep 1; } | script -qec "\"$0\" exec -t \"$1\" -- sh -c \"echo started; sleep 30; echo not-reached\"" /dev/null' "$LCRUN" "$SB"
	[ "$status" -eq 130 ]
	[[ "$output" == *started* ]]
	[[ "$output" != *not-reached* ]]
	[ "$(state_of "$SB")" = running ]
	run "$LCRUN" exec "$SB" -- echo alive
	[ "$output" = alive ]
}

@test "pause stops a counter, resume lets it go on; exec into a paused sandbox is refused" {
	new_sandbox
	# each value is whole in /tmp/n (renamed into place): a freeze can
	# fall between any two steps of the loop
	"$LCRUN" exec -d "$SB" -- sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/n.t; mv /tmp/n.t /tmp/n; sleep 0.05; done'
	wait_for 10 "$LCRUN" exec "$SB" -- test -s /tmp/n
	run "$LCRUN" pause "$SB"
	[ "$status" -eq 0 ]
	[ "$(state_of "$SB")" = paused ]
	"$LCRUN" cp "$SB:/tmp/n" "$BATS_TEST_TMPDIR/a"
	sleep 1
	"$LCRUN" cp "$SB:/tmp/n" "$BATS_TEST_TMPDIR/b"
	[ "$(cat "$BATS_TEST_TMPDIR/a")" -gt 0 ]
	[ "$(cat "$BATS_TEST_TMPDIR/a")" = "$(cat "$BATS_TEST_TMPDIR/b")" ]
	run "$LCRUN" exec "$SB" -- true
	[ "$status" -eq 117 ]
	[[ "$output" == *paused* ]]
	run "$LCRUN" pause "$SB"
	[ "$status" -eq 117 ]
	run "$LCRUN" resume "$SB"
	[ "$status" -eq 0 ]
	grown() {
		"$LCRUN" cp "$SB:/tmp/n" "$BATS_TEST_TMPDIR/c" &&
			[ "$(cat "$BATS_TEST_TMPDIR/c")" -gt "$(cat "$BATS_TEST_TMPDIR/b")" ]
	}
	wait_for 10 grown
	[ "$(cat "$BATS_TEST_TMPDIR/c")" -gt "$(cat "$BATS_TEST_TMPDIR/b")" ]
}

@test "stop/start: files survive, processes do not; exec into a stopped sandbox is refused" {
	new_sandbox --name "ss-$$"
	"$LCRUN" exec "ss-$$" -- sh -c 'echo kept > /root/file'
	"$LCRUN" exec -d "ss-$$" -- sleep 1000
	run "$LCRUN" exec "ss-$$" -- pgrep -x sleep
	[ "$status" -eq 0 ]
	run "$LCRUN" stop "ss-$$"
	[ "$status" -eq 0 ]
	[ "$(state_of "$SB")" = stopped ]
	[ ! -d "$(cgroup2_root)/lcrun/$SB" ]
	run "$LCRUN" exec "ss-$$" -- true
	[ "$status" -eq 117 ]
	run "$LCRUN" cp "ss-$$:/root/file" "$BATS_TEST_TMPDIR/f"
	[ "$status" -eq 117 ]
	run "$LCRUN" stop "ss-$$"
	[ "$status" -eq 117 ]
	run "$LCRUN" start "ss-$$"
	[ "$status" -eq 0 ]
	[ "$(state_of "$SB")" = running ]
	run "$LCRUN" exec "ss-$$" -- cat /root/file
	[ "$output" = kept ]
	run "$LCRUN" exec "ss-$$" -- pgrep -x sleep
	[ "$status" -eq 1 ]
	run "$LCRUN" start "ss-$$"
	[ "$status" -eq 117 ]
}

@test "cp out of a path that is a symlink to /etc/shadow reads the sandbox's file" {
	new_sandbox
	"$LCRUN" exec "$SB" -- sh -c 'echo sandbox-shadow > /etc/shadow; ln -s /etc/shadow /tmp/abs; ln -s ../../../../../../etc/shadow /tmp/rel; mkdir /tmp/d; ln -s /etc /tmp/d/etc'
	for p in /tmp/abs /tmp/rel; do
		run "$LCRUN" cp "$SB:$p" "$BATS_TEST_TMPDIR/out"
		[ "$status" -eq 0 ]
		[ "$(cat "$BATS_TEST_TMPDIR/out")" = sandbox-shadow ]
		refute cmp -s "$BATS_TEST_TMPDIR/out" /etc/shadow
	done
	# a symlink inside a copied directory stays a link, it is not followed
	run "$LCRUN" cp "$SB:/tmp/d" "$BATS_TEST_TMPDIR/d"
	[ "$status" -eq 0 ]
	[ -L "$BATS_TEST_TMPDIR/d/etc" ]
	# writing through a planted link lands in the sandbox, not on the host
	"$LCRUN" exec "$SB" -- ln -s /etc "/tmp/hostetc"
	echo planted > "$BATS_TEST_TMPDIR/lcrun-cp-probe"
	run "$LCRUN" cp "$BATS_TEST_TMPDIR/lcrun-cp-probe" "$SB:/tmp/hostetc/"
	[ "$status" -eq 0 ]
	[ ! -e /etc/lcrun-cp-probe ]
	run "$LCRUN" exec "$SB" -- cat /etc/lcrun-cp-probe
	[ "$output" = planted ]
}

@test "cp: tar streams both ways, missing parents and stopped sandboxes refused" {
	new_sandbox
	mkdir -p "$BATS_TEST_TMPDIR/t/sub"
	echo one > "$BATS_TEST_TMPDIR/t/sub/one"
	tar -C "$BATS_TEST_TMPDIR/t" -cf - sub | "$LCRUN" cp - "$SB:/tmp"
	run "$LCRUN" exec "$SB" -- cat /tmp/sub/one
	[ "$output" = one ]
	run bash -c '"$0" cp "$1:/tmp/sub" - | tar -tf -' "$LCRUN" "$SB"
	[[ "$output" == *"sub/one"* ]]
	run "$LCRUN" cp "$BATS_TEST_TMPDIR/t/sub/one" "$SB:/no/such/dir/one"
	[ "$status" -eq 122 ]
	[ "${#lines[@]}" -eq 1 ]
	run "$LCRUN" cp "$SB:/tmp/sub/one" "$BATS_TEST_TMPDIR/no/such/one"
	[ "$status" -eq 122 ]
	run "$LCRUN" cp "$SB:/no/such/file" "$BATS_TEST_TMPDIR/x"
	[ "$status" -eq 122 ]
	run "$LCRUN" cp "$BATS_TEST_TMPDIR/t" "$BATS_TEST_TMPDIR/u"
	[ "$status" -eq 123 ]
}

@test "exec -d keeps its output for lcrun logs" {
	new_sandbox
	run "$LCRUN" exec -d "$SB" -- sh -c 'echo to-out; echo to-err >&2'
	[ "$status" -eq 0 ]
	[ -z "$output" ]
	wait_for 5 bash -c '"$0" logs "$1" | grep -q to-err' "$LCRUN" "$SB"
	run "$LCRUN" logs "$SB"
	[[ "$output" == *to-out* ]]
	[[ "$output" == *to-err* ]]
}

@test "ps and inspect show the sandbox; ps --json is JSON" {
	new_sandbox --name "ps-$$"
	run "$LCRUN" ps
	[ "$status" -eq 0 ]
	[[ "$output" == *"$SB"*"ps-$$"*running* ]]
	run "$LCRUN" ps --json
	[ "$(jq -r --arg id "$SB" '.[] | select(.id == $id) | .state' <<< "$output")" = running ]
	[ "$(jq -r --arg id "$SB" '.[] | select(.id == $id) | .cpu_usec | type' <<< "$output")" = number ]
	[ "$(jq -r --arg id "$SB" '.[] | select(.id == $id) | .memory_bytes | type' <<< "$output")" = number ]
	run "$LCRUN" inspect "ps-$$"
	[ "$(jq -r .id <<< "$output")" = "$SB" ]
	[ "$(jq -r .pid <<< "$output")" -gt 1 ]
}

@test "ps tells each sandbox's state and usage as its processes and cgroup have them" {
	new_sandbox
	local a=$SB
	new_sandbox
	local b=$SB
	new_sandbox
	local c=$SB
	"$LCRUN" pause "$b"
	"$LCRUN" stop "$c"
	local cg
	cg=$("$LCRUN" inspect "$a" | jq -r .cgroup)
	local cpu0 cpu1 rss=0 page
	cpu0=$(awk '$1 == "usage_usec" { print $2 }' "$cg/cpu.stat")
	run "$LCRUN" ps --json
	[ "$status" -eq 0 ]
	cpu1=$(awk '$1 == "usage_usec" { print $2 }' "$cg/cpu.stat")
	entry() { jq -c --arg id "$1" '.[] | select(.id == $id)' <<< "$output"; }
	[ "$(entry "$a" | jq -r .state)" = running ]
	[ "$(entry "$b" | jq -r .state)" = paused ]
	[ "$(entry "$c" | jq -r .state)" = stopped ]
	# the running one's CPU is its cgroup's, read between the two reads here
	local cpu
	cpu=$(entry "$a" | jq -r .cpu_usec)
	[ "$cpu" -ge "$cpu0" ] && [ "$cpu" -le "$cpu1" ]
	# its memory: memory.current, or its processes' resident memory (an idle
	# sandbox's moves little: within half of it either way)
	local mem want
	mem=$(entry "$a" | jq -r .memory_bytes)
	page=$(getconf PAGESIZE)
	if [ -f "$cg/memory.current" ]; then
		want=$(cat "$cg/memory.current")
	else
		for p in $(cat "$cg/cgroup.procs"); do rss=$((rss + $(awk '{ print $2 }' "/proc/$p/statm") * page)); done
		want=$rss
	fi
	[ "$mem" -gt 0 ] && [ "$mem" -ge $((want / 2)) ] && [ "$mem" -le $((want * 3 / 2)) ]
	[ "$(entry "$b" | jq -r '.memory_bytes | type')" = number ]
	[ "$(entry "$c" | jq -r '[.cpu_usec, .memory_bytes] | map(type) | unique | .[]')" = null ]
	# a state file whose pid 1 is now another process (its pid reused) is
	# not running: the start time decides, not the pid
	"$LCRUN" resume "$b"
	sleep 1000 &
	local other=$!
	local st="$LCRUN_RUN/$b/state.json"
	cp "$st" "$BATS_TEST_TMPDIR/state.json"
	jq --argjson p "$other" '.pid = $p' "$st" >"$st.new" && mv "$st.new" "$st"
	run "$LCRUN" ps --json
	kill "$other"
	mv "$BATS_TEST_TMPDIR/state.json" "$st"
	[ "$(entry "$b" | jq -r .state)" != running ]
	[ "$(entry "$b" | jq -r .cpu_usec)" = null ]
	[ "$(entry "$a" | jq -r .state)" = running ]
	run "$LCRUN" ps
	[ "$status" -eq 0 ]
	grep "^$a " <<< "$output" | grep -Eq ' running +[0-9-]+ [0-9:]+ +[0-9.]+s +[0-9.]+[KMG] +none$'
	grep "^$c " <<< "$output" | grep -Eq ' stopped +[0-9-]+ [0-9:]+ +- +- +none$'
}

@test "past its ttl a sandbox is gone, past its idle timeout it is stopped, with no command run" {
	new_sandbox --ttl 2
	local ttl=$SB
	new_sandbox --idle-timeout 3
	local idle=$SB
	# an exec that runs keeps it busy (past its idle timeout, with margin
	# for a loaded machine)
	"$LCRUN" exec -d "$idle" -- sleep 7
	sleep 4
	[ "$(state_of "$idle")" = running ]
	[ ! -d "$LCRUN_RUN/$ttl" ]
	[ ! -d "$LCRUN_LIB/sandboxes/$ttl" ]
	[ ! -d "$(cgroup2_root)/lcrun/$ttl" ]
	wait_for 15 bash -c '[ "$("$0" inspect "$1" | jq -r .status)" = stopped ]' "$LCRUN" "$idle"
	run "$LCRUN" inspect "$idle"
	[ "$(jq -r .stop_reason <<< "$output")" = "idle timeout" ]
	# a stopped sandbox with a ttl still goes when it expires (a ttl long
	# enough for the stop to come first on a loaded machine)
	new_sandbox --ttl 8
	"$LCRUN" stop "$SB"
	[ "$(state_of "$SB")" = stopped ]
	wait_for 20 bash -c '[ ! -d "$0" ]' "$LCRUN_RUN/$SB"
	[ ! -d "$LCRUN_LIB/sandboxes/$SB" ]
	# stopped by its idle timeout, with a ttl to come: commands still work
	new_sandbox --idle-timeout 1 --ttl 60
	wait_for 5 bash -c '[ "$("$0" inspect "$1" | jq -r .status)" = stopped ]' "$LCRUN" "$SB"
	run timeout 5 "$LCRUN" start "$SB"
	[ "$status" -eq 0 ]
	[ "$(state_of "$SB")" = running ]
}

@test "bad input: unknown id, taken name, rm of a running one, two rm at once" {
	run "$LCRUN" exec nosuchsandbox -- true
	[ "$status" -eq 120 ]
	[ "${#lines[@]}" -eq 1 ]
	run "$LCRUN" stop 000000000000
	[ "$status" -eq 120 ]
	new_sandbox --name "taken-$$"
	run "$LCRUN" create --name "taken-$$"
	[ "$status" -eq 119 ]
	[ "${#lines[@]}" -eq 1 ]
	[ "$(state_of "$SB")" = running ]
	run "$LCRUN" rm "taken-$$"
	[ "$status" -eq 117 ]
	[ "$(state_of "$SB")" = running ]
	run "$LCRUN" exec "taken-$$" -- true
	[ "$status" -eq 0 ]
	run "$LCRUN" create --id "$SB"
	[ "$status" -eq 119 ]
	[ "$(state_of "$SB")" = running ]
	# two rm -f at once: one removes it, the other says it is gone
	"$LCRUN" rm -f "$SB" > "$BATS_TEST_TMPDIR/rm1" 2>&1 &
	local p1=$!
	"$LCRUN" rm -f "$SB" > "$BATS_TEST_TMPDIR/rm2" 2>&1 &
	local p2=$!
	local c1=0 c2=0
	wait $p1 || c1=$?
	wait $p2 || c2=$?
	echo "rm exit codes: $c1 $c2" >&2
	[ $((c1 == 0)) -ne $((c2 == 0)) ] # exactly one succeeded
	local failed=$([ "$c1" -ne 0 ] && echo rm1 || echo rm2)
	[ "$(wc -l < "$BATS_TEST_TMPDIR/$failed")" -eq 1 ]
	[ $((c1 + c2)) -eq 120 ] || [ $((c1 + c2)) -eq 119 ]
	[ ! -d "$LCRUN_RUN/$SB" ]
	[ ! -d "$LCRUN_LIB/sandboxes/$SB" ]
	[ ! -e "$LCRUN_RUN/names/taken-$$" ]
}

# Each create below runs with a marker in its environment, which its monitor,
# staging process and pid 1 inherit: "nothing with the marker left" means
# no process of that attempt survives.
@test "kill -9 during create, then gc: the host is as before" {
	host_snapshot
	local id i interrupted=0 ids="k9-$$-"
	# The kills land from 0 to 110% of how long one create takes on this
	# machine (measured first), closer together early on: a create is
	# acknowledged a few ms after it starts, and only a kill before that
	# interrupts it.  The waits are bash's own (read -t on a FIFO that
	# never speaks): an external sleep, and a subshell for its argument,
	# cost several ms each on a slow machine, and fixed steps of 0-11 ms
	# so taken came after the acknowledgement on all but one try there.
	local probe t0 span d never
	probe=$(printf 'dead%08x' $((RANDOM * 1000 + 99)))
	ids="$ids|$probe"
	t0=$(date +%s%N)
	"$LCRUN" create --id "$probe" --name "k9-$$-probe" > /dev/null
	span=$((($(date +%s%N) - t0) / 1000))
	"$LCRUN" rm -f "$probe" > /dev/null
	[ "$span" -le 800000 ] || span=800000
	echo "one create: $((span / 1000)) ms" >&2
	mkfifo "$BATS_TEST_TMPDIR/never"
	exec {never}<>"$BATS_TEST_TMPDIR/never"
	for i in $(seq 1 12); do
		id=$(printf 'dead%08x' $((RANDOM * 1000 + i)))
		ids="$ids|$id"
		local mark="lc$$-$i"
		# microseconds: span * 1.1 * ((i - 1) / 11)^2
		printf -v d '0.%06d' $(((i - 1) * (i - 1) * span / 110))
		LCRUN_TEST_MARK=$mark "$LCRUN" create --id "$id" --name "k9-$$-$i" > /dev/null 2>&1 &
		local client=$!
		read -r -t "$d" -u "$never" _ || true
		if [ $((i % 2)) = 0 ]; then
			# the monitor: its pid is in the state once it exists
			local m
			m=$(jq -r '.lcrun_pid // empty' "$LCRUN_RUN/$id/state.json" 2>/dev/null || true)
			[ -n "$m" ] && kill -9 "$m" 2>/dev/null || true
		fi
		kill -9 "$client" 2>/dev/null || true
		wait "$client" 2>/dev/null || true
		# the monitor either learns that nobody got the id and ends
		# itself, or got the acknowledgement (the kill came too late)
		local st="$LCRUN_RUN/$id/state.json"
		wait_for 10 bash -c '[ -z "$(grep -lsa "LCRUN_TEST_MARK=$0\b" /proc/[0-9]*/environ)" ] ||
			[ "$(jq -r .confirmed "$1" 2>/dev/null)" = true ]' "$mark" "$st"
		if [ "$(jq -r .confirmed "$st" 2>/dev/null)" = true ]; then
			"$LCRUN" rm -f "$id"
		else
			interrupted=$((interrupted + 1))
		fi
		wait_for 10 bash -c '[ -z "$(grep -lsa "LCRUN_TEST_MARK=$0\b" /proc/[0-9]*/environ)" ]' "$mark"
		run "$LCRUN" gc
		[ "$status" -eq 0 ]
		[ ! -e "$LCRUN_RUN/$id" ]
		[ ! -e "$LCRUN_LIB/sandboxes/$id" ]
		[ ! -e "$(cgroup2_root)/lcrun/$id" ]
		[ ! -e "$LCRUN_RUN/names/k9-$$-$i" ]
		refute grep -q "$id" /proc/self/mountinfo
	done
	exec {never}>&-
	echo "creates interrupted: $interrupted of 12" >&2
	[ "$interrupted" -ge 2 ]
	# mounts, cgroups, netns, links, sandbox dirs, state, names and nft
	# chains as before, as far as these sandboxes go (other sandboxes of
	# this host may come and go meanwhile)
	host_state > "$BATS_TEST_TMPDIR/host.after"
	diff -u <(grep -E "$ids" "$BATS_TEST_TMPDIR/host.before") <(grep -E "$ids" "$BATS_TEST_TMPDIR/host.after")
	[ -z "$(grep -E "$ids" "$BATS_TEST_TMPDIR/host.after")" ]
}

@test "a killed monitor takes its sandbox down; gc marks it stopped and it starts again" {
	new_sandbox
	"$LCRUN" exec "$SB" -- sh -c 'echo survives > /root/f'
	local mon pid1
	mon=$("$LCRUN" inspect "$SB" | jq -r .monitor_pid)
	pid1=$("$LCRUN" inspect "$SB" | jq -r .pid)
	kill -9 "$mon"
	wait_for 5 bash -c '! kill -0 "$0" 2>/dev/null' "$pid1"
	[ "$(state_of "$SB")" = dead ]
	run "$LCRUN" exec "$SB" -- true
	[ "$status" -eq 117 ]
	run "$LCRUN" gc
	[ "$status" -eq 0 ]
	[ "$(state_of "$SB")" = stopped ]
	[ ! -d "$(cgroup2_root)/lcrun/$SB" ]
	"$LCRUN" start "$SB"
	run "$LCRUN" exec "$SB" -- cat /root/f
	[ "$output" = survives ]
}

@test "gc leaves live sandboxes alone" {
	new_sandbox
	local a=$SB
	new_sandbox
	"$LCRUN" stop "$SB"
	# and a `run` in progress, which has no monitor
	"$LCRUN" run -- sh -c 'sleep 1.5; echo run-finished' > "$BATS_TEST_TMPDIR/run.out" &
	local runner=$!
	sleep 0.5
	run "$LCRUN" gc
	[ "$status" -eq 0 ]
	wait "$runner"
	[ "$(cat "$BATS_TEST_TMPDIR/run.out")" = run-finished ]
	[ "$(state_of "$a")" = running ]
	[ "$(state_of "$SB")" = stopped ]
	run "$LCRUN" exec "$a" -- true
	[ "$status" -eq 0 ]
	"$LCRUN" start "$SB"
}

@test "run's directory goes to trash/ and away; gc removes what a killed removal left, not a live one's" {
	local root=$BATS_TEST_TMPDIR/root
	LCRUN_ROOT=$root LCRUN_STATE_DIR=$BATS_TEST_TMPDIR/state "$LCRUN" run -- sh -c 'mkdir -p /srv/a/b && echo x >/srv/a/b/f'
	[ -z "$(ls "$root/sandboxes")" ]
	# removed in the background, within a moment
	for _ in $(seq 50); do [ -z "$(ls "$root/trash")" ] && break; sleep 0.1; done
	[ -z "$(ls "$root/trash")" ]
	# a removal that was killed: no lock on its entry; a live one holds one
	mkdir -p "$root/trash/aaaaaaaaaaaa.dead/upper/x" "$root/trash/bbbbbbbbbbbb.live/upper/y"
	flock "$root/trash/bbbbbbbbbbbb.live" sleep 3 &
	sleep 0.3
	run env LCRUN_ROOT="$root" LCRUN_STATE_DIR="$BATS_TEST_TMPDIR/state" "$LCRUN" gc
	[ "$status" -eq 0 ]
	[[ "$output" == *"removed directory $root/trash/aaaaaaaaaaaa.dead"* ]]
	[ ! -e "$root/trash/aaaaaaaaaaaa.dead" ]
	[ -d "$root/trash/bbbbbbbbbbbb.live/upper/y" ]
	wait
}

@test "run's state goes at once (its name is free, ps is empty) and its files in the background; gc takes what a killed remover left" {
	local root=$BATS_TEST_TMPDIR/root st=$BATS_TEST_TMPDIR/state
	export LCRUN_ROOT=$root LCRUN_STATE_DIR=$st
	"$LCRUN" run --name again -- true
	# the name is free and nothing is listed the moment run returned
	[ ! -e "$st/names/again" ]
	[ "$("$LCRUN" ps --json | jq length)" -eq 0 ]
	[ -z "$(ls "$st" | grep '^[0-9a-f]\{12\}$')" ]
	"$LCRUN" run --name again -- true
	# the state directory went to trash-state/, and from there away
	for _ in $(seq 50); do [ -z "$(ls "$st/trash-state")" ] && break; sleep 0.1; done
	[ -d "$st/trash-state" ]
	[ -z "$(ls "$st/trash-state")" ]
	# one a killed remover left: gc removes it once 10 s old, not before
	mkdir -p "$st/trash-state/cccccccccccc" "$st/trash-state/dddddddddddd"
	echo '{}' >"$st/trash-state/cccccccccccc/state.json"
	touch -d '-1 minute' "$st/trash-state/cccccccccccc"
	run "$LCRUN" gc
	[ "$status" -eq 0 ]
	[[ "$output" == *"removed state $st/trash-state/cccccccccccc"* ]]
	[ ! -e "$st/trash-state/cccccccccccc" ]
	[ -d "$st/trash-state/dddddddddddd" ]
}

@test "gc with another state directory leaves the root's sandbox directories alone; its own gc still collects orphans" {
	local root=$BATS_TEST_TMPDIR/root a=$BATS_TEST_TMPDIR/state-a b=$BATS_TEST_TMPDIR/state-b id
	id=$(LCRUN_ROOT=$root LCRUN_STATE_DIR=$a "$LCRUN" create)
	LCRUN_ROOT=$root LCRUN_STATE_DIR=$a "$LCRUN" exec "$id" -- sh -c 'echo kept >/root/f'
	LCRUN_ROOT=$root LCRUN_STATE_DIR=$a "$LCRUN" stop "$id"
	[ "$(cat "$root/sandboxes/.state-dir")" = "$a" ]
	mkdir -p "$root/sandboxes/aaaaaaaaaaaa/upper"
	# B records nothing of the root's sandboxes: it must not take them for orphans
	run env LCRUN_ROOT="$root" LCRUN_STATE_DIR="$b" "$LCRUN" gc
	[ "$status" -eq 0 ]
	[[ "$output" == *"left the directories of $root/sandboxes alone: their sandboxes are recorded in $a, not in $b"* ]]
	[ -d "$root/sandboxes/$id" ]
	[ -d "$root/sandboxes/aaaaaaaaaaaa" ]
	# A, which keeps the records, collects the orphan and keeps its stopped sandbox
	run env LCRUN_ROOT="$root" LCRUN_STATE_DIR="$a" "$LCRUN" gc
	[ "$status" -eq 0 ]
	[[ "$output" == *"removed directory $root/sandboxes/aaaaaaaaaaaa"* ]]
	[[ "$output" != *"left the directories"* ]]
	LCRUN_ROOT=$root LCRUN_STATE_DIR=$a "$LCRUN" start "$id"
	[ "$(LCRUN_ROOT=$root LCRUN_STATE_DIR=$a "$LCRUN" exec "$id" -- cat /root/f)" = kept ]
	LCRUN_ROOT=$root LCRUN_STATE_DIR=$a "$LCRUN" rm -f "$id"
	# a root an older lcrun made has no .state-dir: it goes with the state
	# directory set together with it
	rm "$root/sandboxes/.state-dir"
	mkdir -p "$root/sandboxes/bbbbbbbbbbbb"
	run env LCRUN_ROOT="$root" LCRUN_STATE_DIR="$b" "$LCRUN" gc
	[ "$status" -eq 0 ]
	[[ "$output" == *"removed directory $root/sandboxes/bbbbbbbbbbbb"* ]]
	# the default root goes with the default state directory, whatever
	# a private one's runs left in it
	run env -u LCRUN_ROOT LCRUN_STATE_DIR="$b" "$LCRUN" gc
	[ "$status" -eq 0 ]
	[[ "$output" == *"left the directories of /var/lib/lcrun/sandboxes alone: their sandboxes are recorded in the default state directory, not in $b"* ]]
	[ ! -e /var/lib/lcrun/sandboxes/.state-dir ]
}
