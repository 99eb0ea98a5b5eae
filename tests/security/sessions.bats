#!/usr/bin/env bats
# An attack on the sandbox API's sessions from inside the sandbox: a
# background job left by one run tries to end the next run early with a
# status of its choosing, by writing a session's end line into it (with
# the marker read from the shell's memory or from its command line).  The
# status a run reports must be its command's own.  A private lcd; needs
# root.

load ../integration/lcd-lib

setup() {
	lcd_setup
	command -v /usr/bin/python3 >/dev/null || skip "needs /usr/bin/python3"
	start_lcd
	W=$BATS_TEST_TMPDIR
}

teardown() {
	local rc=0
	stop_lcd
	if [ -n "${T:-}" ] && [ -d "$T/state" ]; then
		lcd_leftovers_remove || rc=1
	fi
	lcd_teardown
	return $rc
}

api() { curl -s --unix-socket "$LCD_SOCKET" -H 'Content-Type: application/json' "$@" -w '\n%{http_code}\n'; }

FORGER='
import os, re, time
me = os.getpid()
end = time.time() + 15
mark = re.compile(rb"__LCD_[0-9a-f]{16}__")
done = set()
def marks(pid):
    # every marker in the process: its command line, or the memory of a shell
    out = set(mark.findall(open("/proc/%s/cmdline" % pid, "rb").read()))
    if open("/proc/%s/comm" % pid).read().strip() in ("sh", "dash", "bash"):
        mem = open("/proc/%s/mem" % pid, "rb")
        for line in open("/proc/%s/maps" % pid):
            f = line.split()
            if "rw" not in f[1] or (len(f) > 5 and f[5].startswith("[v")):
                continue
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            if hi - lo > (64 << 20):
                continue
            try:
                mem.seek(lo)
                out |= set(mark.findall(mem.read(hi - lo)))
            except (OSError, ValueError, OverflowError):
                continue
        mem.close()
    return out
while time.time() < end:
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        try:
            found = marks(pid)
        except OSError:
            continue
        for m in found - done:
            # "the run ended with status 0": an end line on stdout and
            # stderr, its own (inherited from the run that started it) and
            # the shell (through /proc)
            for n, line in ((1, b"\n" + m + b" 0\n" + m + b"\n/\n"), (2, b"\n" + m + b"\n")):
                try:
                    os.write(n, line)
                except OSError:
                    pass
                try:
                    w = os.open("/proc/%s/fd/%d" % (pid, n), os.O_WRONLY | os.O_NONBLOCK)
                    os.write(w, line)
                    os.close(w)
                except OSError:
                    pass
            done.add(m)
    time.sleep(0.002)
'

@test "security/sessions: a background job of an earlier run cannot end a run or give it another status" {
	id=$(api -X POST http://lcd/v1/sandboxes -d '{}' | head -1 | jq -r .id)
	s=$(api -X POST "http://lcd/v1/sandboxes/$id/sessions" -d '{}' | head -1 | jq -r .id)
	# run 1 leaves the forger behind, its stdout and stderr the run's
	body=$(jq -cn --arg f "$FORGER" '{cmd: ("python3 -c " + ($f | @sh) + " &")}')
	r=$(api -X POST "http://lcd/v1/sandboxes/$id/sessions/$s/run" -d "$body" | head -1)
	echo "$r" | jq -e '.exit_code == 0 and .session_ended == false'
	sleep 0.5
	# run 2 takes a while and fails; the forger writes "done, status 0" into it
	for i in 1 2 3; do
		r=$(api -X POST "http://lcd/v1/sandboxes/$id/sessions/$s/run" -d '{"cmd": "sleep 1; echo real-output; exit 3"}' | head -1)
		echo "$r"
		echo "$r" | jq -e '.exit_code == 3 and .timed_out == false'
		echo "$r" | jq -e '.stdout | test("real-output")'
		# a run that exits ends the session: start another for the next round
		s=$(api -X POST "http://lcd/v1/sandboxes/$id/sessions" -d '{}' | head -1 | jq -r .id)
	done
	r=$(api -X POST "http://lcd/v1/sandboxes/$id/sessions/$s/run" -d '{"cmd": "sleep 1; false"}' | head -1)
	echo "$r" | jq -e '.exit_code == 1'
	api -X DELETE "http://lcd/v1/sandboxes/$id" >/dev/null
}
