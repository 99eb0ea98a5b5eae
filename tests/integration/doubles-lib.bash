# doubles-lib.bash — the test doubles of tests/fixtures as a bats test
# starts them (see docs/hacking.md, "Test doubles").  Load it with `load doubles-lib`.
#
#   dbl_netns_up / dbl_netns_down   a network namespace of the test's own
#       ($DBL_NS, loopback up) with a veth to the host; the service
#       addresses $DBL4 (192.0.2.10) and $DBL6 (2001:db8:d0b::10) inside it
#       are routed to it, so a sandbox with --net allow --allow $DBL4:PORT
#       reaches a double there and nothing else.  The namespace has no
#       default route: nothing started in it can send beyond the host's
#       side of the link (198.18.7.1, where masqueraded sandbox traffic
#       comes from).
#   dbl_start NAME TAG [ARGS...]    runs tests/fixtures/NAME in $DBL_NS
#       (ARGS are its own: --listen, --script, --log ...); waits for its
#       port; sets DBL_PORT and records the pid in $BATS_TEST_TMPDIR/TAG.pid,
#       its output in TAG.out and TAG.err.
#   dbl_stop TAG                    stops it (TERM, then KILL)
#   in_ns CMD...                    runs CMD in $DBL_NS
#   agent_cli_image                 builds images/agent-cli.json into the
#       image store (every step cached after the first build) or skips the
#       test with the reason it cannot be built here (and the file's later
#       tests at once).
#   sandbox_id_base                 the host uid that root inside a sandbox is
#       (a directory bound into a sandbox is chowned to base+UID for UID to
#       write it).

DBL_FIXTURES=$(cd "$BATS_TEST_DIRNAME/../fixtures" && pwd)
DBL_PY=/usr/bin/python3
# (DBL4 and DBL6 may be set beforehand: two suites that run at once on one
# host then route each its own address)
: "${DBL4:=192.0.2.10}"
: "${DBL6:=2001:db8:d0b::10}"
: "${DBL_NS:=lcdbl-$$}"
DBL_HV=${DBL_NS:0:10}h

in_ns() {
	ip netns exec "$DBL_NS" "$@"
}

dbl_netns_up() {
	dbl_netns_down
	ip netns add "$DBL_NS" || return 1
	ip link add "$DBL_HV" type veth peer name eth0 netns "$DBL_NS" || return 1
	ip addr add 198.18.7.1/30 dev "$DBL_HV"
	ip link set "$DBL_HV" up
	in_ns ip link set lo up
	in_ns ip link set eth0 up
	in_ns ip addr add 198.18.7.2/30 dev eth0
	in_ns ip addr add "$DBL4/32" dev eth0
	in_ns ip addr add "$DBL6/128" dev eth0 nodad
	ip route add "$DBL4/32" dev "$DBL_HV"
	ip -6 route add "$DBL6/128" dev "$DBL_HV"
}

dbl_netns_down() {
	# The routes go with the link.
	ip link del "$DBL_HV" 2>/dev/null || true
	ip netns del "$DBL_NS" 2>/dev/null || true
}

dbl_start() {
	local name=$1 tag=$2
	shift 2
	local pf=$BATS_TEST_TMPDIR/$tag.port
	rm -f "$pf"
	# ip netns exec execs the double: $! is its pid.  Nothing of bats' own
	# output may stay open in it (fd 3 too), or bats waits for it.
	ip netns exec "$DBL_NS" "$DBL_PY" "$DBL_FIXTURES/$name" --port-file "$pf" "$@" \
		</dev/null >"$BATS_TEST_TMPDIR/$tag.out" 2>"$BATS_TEST_TMPDIR/$tag.err" 3>&- &
	echo $! >"$BATS_TEST_TMPDIR/$tag.pid"
	for _ in $(seq 100); do
		[ -s "$pf" ] && break
		kill -0 "$(cat "$BATS_TEST_TMPDIR/$tag.pid")" 2>/dev/null || break
		sleep 0.05
	done
	if [ ! -s "$pf" ]; then
		echo "$name did not start: $(cat "$BATS_TEST_TMPDIR/$tag.err")"
		return 1
	fi
	DBL_PORT=$(cat "$pf")
}

dbl_stop() {
	local f=$BATS_TEST_TMPDIR/$1.pid p
	[ -f "$f" ] || return 0
	p=$(cat "$f")
	kill -TERM "$p" 2>/dev/null || true
	for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
	kill -KILL "$p" 2>/dev/null || true
	rm -f "$f"
}

sandbox_id_base() {
	"$LCRUN" run -- cat /proc/self/uid_map | awk '$1 == 0 { print $2; exit }'
}

agent_cli_image() {
	local out skipfile=${BATS_FILE_TMPDIR:-$BATS_TEST_TMPDIR}/agent-cli.skip
	[ -f "$skipfile" ] && skip "$(cat "$skipfile")"
	out=$(timeout -k 2 1800 "$LCRUN" image build "$BATS_TEST_DIRNAME/../../images/agent-cli.json" 2>&1) || {
		echo "the agent-cli image cannot be built here: $(echo "$out" | tail -1)" >"$skipfile"
		skip "$(cat "$skipfile")"
	}
}
