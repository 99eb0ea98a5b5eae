# net-lib.bash — test hosts for net.bats.
#
# One network namespace, lcnt-world, holds every address a test sends to;
# the host routes the documentation ranges (and the private and metadata
# addresses the tests use) to it, so no probe can leave the machine even
# when a firewall rule is wrong:
#   api        198.51.100.10   2001:db8:a::10    inside the allowed ranges
#   forbidden  203.0.113.20    2001:db8:f::20    outside them
#   public     203.0.113.80    2001:db8:b::80    "the internet" under --net open
#   resolver   203.0.113.53    2001:db8:b::53    DNS port 53 (udp and tcp)
#   private    172.16.99.10    fd12:3456::10
#   metadata   169.254.169.254
# Each answers TCP and UDP on ports 53, 80 and 443 with "hello ADDR PORT".
# The host's own side of the link (198.18.0.1, 2001:db8:ffff::1) answers
# on port 7011: "the host itself".

PY=/usr/bin/python3
NET_TESTS=$BATS_TEST_DIRNAME
PROBE_SRC=$(cat "$NET_TESTS/net-probe.py")
WORLD_SRC=$(cat "$NET_TESTS/net-world.py")
NS=lcnt-world
HV=lcntw0

API4=198.51.100.10 API6=2001:db8:a::10
FORB4=203.0.113.20 FORB6=2001:db8:f::20
PUB4=203.0.113.80 PUB6=2001:db8:b::80
DNS4=203.0.113.53 DNS6=2001:db8:b::53
PRIV4=172.16.99.10 PRIV6=fd12:3456::10
META4=169.254.169.254
HOST4=198.18.0.1 HOST6=2001:db8:ffff::1
WORLD_ADDRS="$API4 $API6 $FORB4 $FORB6 $PUB4 $PUB6 $DNS4 $DNS6 $PRIV4 $PRIV6 $META4"
WORLD_ROUTES4="198.51.100.0/24 203.0.113.0/24 172.16.99.0/24 169.254.169.254/32"
WORLD_ROUTES6="2001:db8::/32 fd12:3456::/64"

# Which sandbox runs the probes: lcrun itself, or (before lcrun has the
# network wired in, or with NET_SANDBOX=harness) the library-level harness
# that puts a plain network namespace around the command.
NET_HARNESS=${NET_HARNESS:-$(dirname "${LCRUN:-./lcrun}")/tests/integration/net-harness}
# An lcrun whose --net takes only "none" (the network not wired in yet)
# says so; anything else it says is a result to test.
lcrun_has_net() {
	[ -n "${LCRUN:-}" ] && [ -x "$LCRUN" ] || return 1
	local out
	out=$("$LCRUN" run --net open -- true 2>&1)
	[[ "$out" != *"expected none, allow or open"* && "$out" != *"not built into this lcrun"* ]]
}
if [ -n "${NET_SANDBOX:-}" ]; then
	SB_KIND=$NET_SANDBOX
elif lcrun_has_net; then
	SB_KIND=lcrun
else
	SB_KIND=harness
fi

# "${SB[@]}" FLAGS -- CMD runs CMD in a sandbox (started in the background,
# $! is the sandbox's manager itself, which forwards TERM to CMD).
if [ "$SB_KIND" = lcrun ]; then
	SB=("$LCRUN" run)
else
	SB=("$NET_HARNESS" run)
fi

sb() {
	"${SB[@]}" "$@"
}

need_lcrun() {
	[ "$SB_KIND" = lcrun ] || skip "needs \$LCRUN run with --net (running on the harness)"
}

wait_ready() { # FILE: wait until a service printed "ready"
	for _ in $(seq 100); do
		grep -q ready "$1" 2>/dev/null && return 0
		sleep 0.05
	done
	echo "service did not start: $(cat "$1")"
	return 1
}

world_up() {
	world_down
	ip netns add $NS
	ip link add $HV type veth peer name eth0 netns $NS
	ip addr add $HOST4/30 dev $HV
	ip addr add fe80::1/64 dev $HV nodad
	ip addr add $HOST6/64 dev $HV nodad
	ip link set $HV up
	local W="ip netns exec $NS"
	$W ip link set lo up
	$W ip link set eth0 up
	$W ip addr add 198.18.0.2/30 dev eth0
	$W ip addr add 2001:db8:ffff::2/64 dev eth0 nodad
	local a
	for a in $WORLD_ADDRS; do
		case $a in
		*:*) $W ip addr add "$a/128" dev eth0 nodad ;;
		*) $W ip addr add "$a/32" dev eth0 ;;
		esac
	done
	$W ip route add default via $HOST4
	$W ip -6 route add default via fe80::1 dev eth0
	for a in $WORLD_ROUTES4; do ip route add "$a" dev $HV; done
	for a in $WORLD_ROUTES6; do ip -6 route add "$a" dev $HV; done
	$W $PY -c "$WORLD_SRC" 53,80,443 $WORLD_ADDRS >"$BATS_FILE_TMPDIR/world.log" 2>&1 &
	echo $! >"$BATS_FILE_TMPDIR/world.pid"
	$PY -c "$WORLD_SRC" 7011 $HOST4 $HOST6 >"$BATS_FILE_TMPDIR/hostsvc.log" 2>&1 &
	echo $! >"$BATS_FILE_TMPDIR/hostsvc.pid"
	wait_ready "$BATS_FILE_TMPDIR/world.log"
	wait_ready "$BATS_FILE_TMPDIR/hostsvc.log"
}

world_down() {
	local f
	for f in world hostsvc; do
		[ -f "$BATS_FILE_TMPDIR/$f.pid" ] && kill "$(cat "$BATS_FILE_TMPDIR/$f.pid")" 2>/dev/null
		rm -f "$BATS_FILE_TMPDIR/$f.pid"
	done
	# The routes go with the link.
	ip link del $HV 2>/dev/null || true
	ip netns del $NS 2>/dev/null || true
}

# probe [sandbox flags...] -- SPEC...: run net-probe.py in a sandbox; the
# output has one line per SPEC.
probe() {
	local flags=()
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		flags+=("$1")
		shift
	done
	shift
	run sb "${flags[@]}" -- $PY -c "$PROBE_SRC" "$@"
}

# expect ok|fail SPEC...: each probe of the last run had that outcome; an
# answer must name the address and port that were asked.
expect() {
	local want=$1 s line
	shift
	for s in "$@"; do
		line=$(grep -F -- "$s " <<<"$output" | head -n1)
		if [[ "$line" != "$s $want"* ]]; then
			echo "expected '$want' for $s, got: ${line:-no line}"
			echo "--- output (status $status):"
			echo "$output"
			return 1
		fi
		if [ "$want" = ok ]; then
			local proto addr port
			IFS=, read -r proto addr port <<<"$s"
			if [ "$proto" != icmp ] && [[ "$line" != *"hello $addr $port $proto"* ]]; then
				echo "wrong answer for $s: $line"
				return 1
			fi
		fi
	done
}

# Anything a sandbox leaves on the host: veths, chains, leases.
leftovers() {
	ip -o link show | grep -oE 'lc[0-9a-f]{12}' || true
	nft list table inet lcrun 2>/dev/null | grep -oE 'chain (out|in|host)_[0-9a-f]{12}' || true
	ls "$LCRUN_STATE_DIR"/net/*.json 2>/dev/null || true
}

leases() {
	ls "$LCRUN_STATE_DIR"/net/*.json 2>/dev/null | wc -l
}

no_leftovers() {
	local l
	net_settle
	l=$(leftovers)
	[ -z "$l" ] || {
		echo "left behind:" $l
		return 1
	}
}
