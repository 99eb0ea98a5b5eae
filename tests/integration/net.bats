#!/usr/bin/env bats
# Network modes as a user sees them: what a sandbox can and cannot reach,
# named policies, the address pool, teardown and gc.  Runs as root.  Every
# address probed is a test host in lcnt-world (see net-lib.bash).

load helpers
load net-lib

setup_file() {
	[ "$(id -u)" = 0 ] || skip "needs root"
	# A state directory of the file's own goes with a root of its own (a
	# private state directory over the default root is refused).
	export LCRUN_STATE_DIR=$BATS_FILE_TMPDIR/state LCRUN_ROOT=$BATS_FILE_TMPDIR/root
	export LCRUN_ETC_DIR=$BATS_FILE_TMPDIR/etc
	export LCRUN_CONFIG=$BATS_FILE_TMPDIR/lcrun.json
	mkdir -p "$LCRUN_STATE_DIR" "$LCRUN_ETC_DIR"
	echo '{"net_pool": "10.213.0.0/16", "net_pool6": "fd6c:6372:ff00::/48"}' >"$LCRUN_CONFIG"
	# A kernel without nf_tables (the VM's) runs only the test for that.
	if ! nft list tables >/dev/null 2>&1; then
		touch "$BATS_FILE_TMPDIR/no-nftables"
		return 0
	fi
	world_up || {
		world_down
		skip "cannot build the test hosts (network namespaces, veth)"
	}
}

setup() {
	if [ -e "$BATS_FILE_TMPDIR/no-nftables" ] && [[ "$BATS_TEST_DESCRIPTION" != *"without nftables"* ]]; then
		skip "this kernel has no nftables"
	fi
}

teardown_file() {
	world_down
}

teardown() {
	local p
	# Sandboxes a test left running: TERM reaches their command and they
	# tear down as usual.
	for p in $(cat "$BATS_TEST_TMPDIR"/bg.pids 2>/dev/null); do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in $(cat "$BATS_TEST_TMPDIR"/bg.pids 2>/dev/null); do
		for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
	done
	ip link del lc0000000000dd 2>/dev/null || true
	LCRUN_ROOT="$BATS_TEST_TMPDIR/root" "$LCRUN" rm -f restarted >/dev/null 2>&1 || true
}

@test "allow: the allowed range answers on its listed port and on no other" {
	probe --net allow --allow 198.51.100.0/28:443 --allow "[2001:db8:a::/48]:443" -- \
		tcp,$API4,443 udp,$API4,443 tcp,$API6,443 udp,$API6,443 \
		tcp,$API4,80 udp,$API4,80 tcp,$API6,80 udp,$API6,80 icmp,$API4,0
	[ "$status" -eq 0 ]
	expect ok tcp,$API4,443 udp,$API4,443 tcp,$API6,443 udp,$API6,443
	expect fail tcp,$API4,80 udp,$API4,80 tcp,$API6,80 udp,$API6,80 icmp,$API4,0
}

@test "allow: a host outside the list is unreachable over TCP, UDP and ICMP, IPv4 and IPv6" {
	probe --net allow --allow 198.51.100.0/28 --allow 2001:db8:a::/48 -- \
		tcp,$API4,80 udp,$API4,53 icmp,$API4,0 tcp,$API6,80 udp,$API6,53 icmp,$API6,0 \
		tcp,$FORB4,443 udp,$FORB4,443 icmp,$FORB4,0 tcp,$FORB6,443 udp,$FORB6,443 icmp,$FORB6,0
	[ "$status" -eq 0 ]
	expect ok tcp,$API4,80 udp,$API4,53 icmp,$API4,0 tcp,$API6,80 udp,$API6,53 icmp,$API6,0
	expect fail tcp,$FORB4,443 udp,$FORB4,443 icmp,$FORB4,0 tcp,$FORB6,443 udp,$FORB6,443 icmp,$FORB6,0
}

@test "allow: no DNS to any resolver unless it is listed" {
	probe --net allow --allow 198.51.100.0/28:443 --dns $DNS4 -- \
		udp,$DNS4,53 tcp,$DNS4,53 udp,$DNS6,53 tcp,$DNS6,53
	[ "$status" -eq 0 ]
	expect fail udp,$DNS4,53 tcp,$DNS4,53 udp,$DNS6,53 tcp,$DNS6,53
	probe --net allow --allow $DNS4:53 --dns $DNS4 -- udp,$DNS4,53 tcp,$DNS6,53
	expect ok udp,$DNS4,53
	expect fail tcp,$DNS6,53
}

@test "open: public hosts answer; private, metadata and the host itself do not" {
	# The host's own service answers the host (so a failure below is the
	# firewall's doing).
	run $PY -c "$PROBE_SRC" tcp,$HOST4,7011 tcp,$HOST6,7011
	expect ok tcp,$HOST4,7011 tcp,$HOST6,7011
	probe --net open -- \
		tcp,$PUB4,443 udp,$PUB4,53 icmp,$PUB4,0 tcp,$PUB6,443 udp,$PUB6,53 icmp,$PUB6,0 udp,$DNS4,53 \
		tcp,$PRIV4,80 udp,$PRIV4,53 icmp,$PRIV4,0 tcp,$PRIV6,80 icmp,$PRIV6,0 \
		tcp,$META4,80 udp,$META4,53 icmp,$META4,0 \
		tcp,$HOST4,7011 udp,$HOST4,7011 tcp,$HOST6,7011 icmp,gw4,0 icmp,gw6,0 tcp,gw4,7011
	[ "$status" -eq 0 ]
	expect ok tcp,$PUB4,443 udp,$PUB4,53 icmp,$PUB4,0 tcp,$PUB6,443 udp,$PUB6,53 icmp,$PUB6,0 udp,$DNS4,53
	expect fail tcp,$PRIV4,80 udp,$PRIV4,53 icmp,$PRIV4,0 tcp,$PRIV6,80 icmp,$PRIV6,0
	expect fail tcp,$META4,80 udp,$META4,53 icmp,$META4,0
	expect fail tcp,$HOST4,7011 udp,$HOST4,7011 tcp,$HOST6,7011 icmp,gw4,0 icmp,gw6,0 tcp,gw4,7011
}

@test "open: --allow punches a hole for one private destination" {
	probe --net open --allow $PRIV4:80 -- tcp,$PRIV4,80 tcp,$PRIV4,443 tcp,$PRIV6,80 tcp,$PUB4,80
	[ "$status" -eq 0 ]
	expect ok tcp,$PRIV4,80 tcp,$PUB4,80
	expect fail tcp,$PRIV4,443 tcp,$PRIV6,80
}

@test "open: another sandbox is unreachable" {
	"${SB[@]}" --net open -- $PY -c "$WORLD_SRC" 9000 0.0.0.0 >"$BATS_TEST_TMPDIR/b.log" 2>&1 &
	echo $! >>"$BATS_TEST_TMPDIR/bg.pids"
	wait_ready "$BATS_TEST_TMPDIR/b.log"
	local lease addr
	lease=$(ls "$LCRUN_STATE_DIR"/net/*.json)
	addr=$(jq -r .address "$lease")
	# The host itself reaches it (the service is up) ...
	run $PY -c "$PROBE_SRC" tcp,$addr,9000
	expect ok tcp,$addr,9000
	# ... another sandbox does not, neither under open nor when it lists it.
	probe --net open -- tcp,$addr,9000 icmp,$addr,0 tcp,$PUB4,80
	expect ok tcp,$PUB4,80
	expect fail tcp,$addr,9000 icmp,$addr,0
	probe --net allow --allow "$addr:9000" -- tcp,$addr,9000
	expect fail tcp,$addr,9000
	kill -TERM "$(cat "$BATS_TEST_TMPDIR/bg.pids")"
	wait
	no_leftovers
}

@test "a sandbox's veth, chains and lease exist while it runs and vanish after" {
	"${SB[@]}" --net allow --allow 198.51.100.0/28:443 -- sleep 30 2>"$BATS_TEST_TMPDIR/run.err" &
	local pid=$!
	echo $pid >>"$BATS_TEST_TMPDIR/bg.pids"
	for _ in $(seq 100); do [ "$(leases)" = 1 ] && break; sleep 0.05; done
	[ "$(leases)" = 1 ] || {
		echo "leases: $(leases); run: $(cat "$BATS_TEST_TMPDIR/run.err")"
		false
	}
	local id
	id=$(basename "$(ls "$LCRUN_STATE_DIR"/net/*.json)" .json)
	# The chains come last in setup.
	for _ in $(seq 100); do nft list chain inet lcrun "host_$id" >/dev/null 2>&1 && break; sleep 0.05; done
	ip link show "lc$id"
	nft list chain inet lcrun "out_$id" | grep -q 'counter packets .* drop'
	nft list chain inet lcrun "host_$id"
	nft list map inet lcrun fwd_out | grep -q "lc$id"
	[ "$(jq -r .veth "$LCRUN_STATE_DIR/net/$id.json")" = "lc$id" ]
	kill -TERM $pid
	wait $pid || true
	no_leftovers
}

# A sandbox ended (TERM, which run forwards to its command) while this
# shell holds the pool lock on fd 8: its helper cannot remove the chains
# and release the lease (that needs the lock), so run returns without
# waiting for its remainder.  Sets id and pending (the file its helper
# holds).
end_with_remainder_held() {
	"${SB[@]}" --net allow --allow 198.51.100.0/28:443 -- sleep 30 &
	local pid=$!
	echo $pid >>"$BATS_TEST_TMPDIR/bg.pids"
	for _ in $(seq 100); do [ "$(leases)" = 1 ] && break; sleep 0.05; done
	id=$(basename "$(ls "$LCRUN_STATE_DIR"/net/*.json)" .json)
	for _ in $(seq 100); do nft list chain inet lcrun "host_$id" >/dev/null 2>&1 && break; sleep 0.05; done
	exec 8>>"$LCRUN_STATE_DIR/net/pool.lock"
	flock 8
	kill -TERM $pid
	# run returns although its helper waits for the lock
	wait $pid || true
	[ -e "$LCRUN_STATE_DIR/net/$id.json" ]
	pending=$(grep -lx "$id" "$LCRUN_STATE_DIR"/net/pending.*)
	if flock -n -s "$pending" true; then false; fi
}

@test "run returns before its network's remainder is removed; the lease is held until it is; the next run is not held up" {
	need_lcrun
	local id pending first
	end_with_remainder_held
	first=$(jq -r .address "$LCRUN_STATE_DIR/net/$id.json")
	# Its chains are still in force while the lease is held.
	nft list chain inet lcrun "out_$id" | grep -q 'counter packets .* drop'
	exec 8>&-
	# The next run starts while the helper may still be at work, and
	# gets an address of its own.
	run sb --net allow --allow 198.51.100.0/28:443 -- ip -o -4 addr show dev eth0
	[ "$status" -eq 0 ]
	[[ "$output" == *"inet 10.213."* ]]
	[[ "$output" != *"inet $first/"* ]]
	# gc --wait waits for the helpers: it finds nothing to collect, the
	# helper removed it all.
	run env LCRUN_ROOT="$BATS_TEST_TMPDIR/root" "$LCRUN" gc --wait --json
	[ "$status" -eq 0 ]
	[[ "$output" != *"removed the network"* ]]
	[ -z "$(leftovers)" ]
	flock -n -s "$pending" true
}

@test "a stopped sandbox started again at once waits for its last run's network remainder, then gets its network" {
	need_lcrun
	local id pending pid
	export LCRUN_ROOT="$BATS_TEST_TMPDIR/root"
	id=$("$LCRUN" create --name restarted --net allow --allow 198.51.100.0/28:443)
	[ -e "$LCRUN_STATE_DIR/net/$id.json" ]
	# Stopped while this shell holds the pool lock: the monitor's helper
	# keeps the veth, chains and lease until the lock is let go.
	exec 8>>"$LCRUN_STATE_DIR/net/pool.lock"
	flock 8
	"$LCRUN" stop restarted
	pending=$(grep -lx "$id" "$LCRUN_STATE_DIR"/net/pending.*)
	if flock -n -s "$pending" true; then false; fi
	"$LCRUN" start restarted 2>"$BATS_TEST_TMPDIR/start.err" 8>&- &
	pid=$!
	sleep 0.3
	kill -0 "$pid" # it waits for the remainder, it does not fail on the lease
	exec 8>&-
	wait "$pid" || { cat "$BATS_TEST_TMPDIR/start.err"; false; }
	[ "$("$LCRUN" inspect restarted | jq -r .status)" = running ]
	"$LCRUN" exec restarted -- ip -o -4 addr show dev eth0 | grep -q "inet 10.213."
	ip link show "lc$id"
	"$LCRUN" rm -f restarted
	no_leftovers
}

@test "a remainder whose helper was killed is collected by gc" {
	need_lcrun
	local id pending helper
	end_with_remainder_held
	# The holder of the pending file: run's remover, which takes it over
	# the socket and its name with it (the file may be in flight a moment).
	for _ in $(seq 100); do
		helper=$(fuser "$pending" 2>/dev/null | tr -s ' ' '\n' | grep -E '^[0-9]+$' | head -n1)
		[ -n "$helper" ] && [ "$(cat /proc/"$helper"/comm 2>/dev/null)" = lcrun-net ] && break
		sleep 0.05
	done
	[ -n "$helper" ]
	[ "$(cat /proc/"$helper"/comm)" = lcrun-net ]
	kill -9 "$helper"
	exec 8>&-
	for _ in $(seq 100); do kill -0 "$helper" 2>/dev/null || break; sleep 0.05; done
	[ -e "$LCRUN_STATE_DIR/net/$id.json" ]
	run env LCRUN_ROOT="$BATS_TEST_TMPDIR/root" "$LCRUN" gc --wait
	[ "$status" -eq 0 ]
	[[ "$output" == *"removed the network (veth, firewall chains, address lease) of 1 sandbox"* ]]
	no_leftovers
}

@test "with every pending slot taken, run removes its network itself before it returns" {
	need_lcrun
	local k fds=()
	mkdir -p "$LCRUN_STATE_DIR/net"
	# LC_NET_PENDING_MAX (net.h) helpers at most
	for k in $(seq 0 15); do
		exec {fd}>>"$LCRUN_STATE_DIR/net/pending.$k"
		flock -n "$fd" || {
			local p
			for p in $(fuser "$LCRUN_STATE_DIR/net/pending.$k" 2>/dev/null); do
				echo "pending.$k held by $p: $(tr '\0' ' ' </proc/"$p"/cmdline)"
			done
			false
		}
		fds+=("$fd")
	done
	run sb --net allow --allow 198.51.100.0/28:443 -- true
	[ "$status" -eq 0 ]
	# nothing left the moment it returned, no helper to wait for
	local l
	l=$(leftovers)
	for fd in "${fds[@]}"; do exec {fd}>&-; done
	[ -z "$l" ]
}

@test "drops are counted, and describe reports the lease and the count" {
	# The sandbox knocks on a forbidden host, then waits to be looked at.
	"${SB[@]}" --net allow --allow 198.51.100.0/28:443 -- \
		sh -c "$PY -c \"\$0\" tcp,$FORB4,443 udp,$FORB6,53; sleep 30" "$PROBE_SRC" \
		>"$BATS_TEST_TMPDIR/knock.log" 2>&1 &
	local pid=$!
	echo $pid >>"$BATS_TEST_TMPDIR/bg.pids"
	for _ in $(seq 100); do grep -q "udp,$FORB6,53 fail" "$BATS_TEST_TMPDIR/knock.log" 2>/dev/null && break; sleep 0.1; done
	grep -q "tcp,$FORB4,443 fail" "$BATS_TEST_TMPDIR/knock.log"
	local id
	id=$(basename "$(ls "$LCRUN_STATE_DIR"/net/*.json)" .json)
	run "$NET_HARNESS" describe "$id"
	[ "$status" -eq 0 ]
	[ "$(jq -r .mode <<<"$output")" = allow ]
	[ "$(jq -r .veth <<<"$output")" = "lc$id" ]
	[[ "$(jq -r .address <<<"$output")" == 10.213.* ]]
	[[ "$(jq -r .address6 <<<"$output")" == fd6c:6372:ff00:* ]]
	# a TCP SYN with its retransmissions and a UDP datagram
	[ "$(jq -r .dropped_packets <<<"$output")" -ge 2 ]
	kill -TERM $pid
	wait $pid || true
	# the lease goes last, when its helper has removed the rest
	net_settle
	run "$NET_HARNESS" describe "$id"
	[ "$status" -ne 0 ]
	no_leftovers
}

@test "50 sandboxes started at once each get their own address and all tear down clean" {
	# each waits for the file go in the directory gate (bound read-only
	# into an lcrun sandbox, whose /tmp is its own)
	local i start=$SECONDS gate=$BATS_TEST_TMPDIR/gate bind=() inside
	mkdir "$gate"
	inside=$gate
	if [ "$SB_KIND" = lcrun ]; then
		bind=(--bind "$gate:/gate:ro")
		inside=/gate
	fi
	for i in $(seq 50); do
		"${SB[@]}" "${bind[@]}" --net allow --allow 198.51.100.0/28:443 -- \
			sh -c "ip -o -4 addr show dev eth0; $PY -c \"\$0\" tcp,$API4,443; while [ ! -e $inside/go ]; do sleep 0.1; done" \
			"$PROBE_SRC" >"$BATS_TEST_TMPDIR/sb.$i" 2>&1 &
	done
	# All 50 hold their lease at the same time (each waits for the others) ...
	local most=0 n
	for _ in $(seq 1800); do
		n=$(leases)
		[ "$n" -gt "$most" ] && most=$n
		[ "$most" -eq 50 ] && break
		sleep 0.1
	done
	echo "50 set up in $((SECONDS - start)) s"
	touch "$gate/go"
	[ "$most" -eq 50 ]
	wait
	# ... each reached the allowed host, with an address of its own.
	cat "$BATS_TEST_TMPDIR"/sb.* | grep -c "tcp,$API4,443 ok hello" | grep -qx 50 || {
		cat "$BATS_TEST_TMPDIR"/sb.*
		false
	}
	local addrs
	addrs=$(cat "$BATS_TEST_TMPDIR"/sb.* | grep -oE 'inet 10\.213\.[0-9.]+' | sort)
	[ "$(wc -l <<<"$addrs")" -eq 50 ]
	[ "$(sort -u <<<"$addrs" | wc -l)" -eq 50 ]
	no_leftovers
}

@test "gc removes what a killed sandbox left and nothing a live one uses" {
	local stop=$BATS_TEST_TMPDIR/stop
	# A live sandbox with a known id ...
	"$NET_HARNESS" run --id aaaaaaaaaaa1 --net allow --allow 198.51.100.0/28:443 -- \
		sh -c 'while [ ! -e "$0" ]; do sleep 0.1; done' "$stop" &
	local live=$!
	echo $live >>"$BATS_TEST_TMPDIR/bg.pids"
	# ... and one whose manager is killed while it runs (its command lives on).
	"$NET_HARNESS" run --id bbbbbbbbbbb2 --net open -- \
		sh -c 'echo $$ >"$0"; kill -9 $PPID; exec sleep 20' "$BATS_TEST_TMPDIR/orphan.pid" &
	local dead=$!
	for _ in $(seq 60); do [ "$(leases)" = 2 ] && ! kill -0 $dead 2>/dev/null && break; sleep 0.05; done
	cat "$BATS_TEST_TMPDIR/orphan.pid" >>"$BATS_TEST_TMPDIR/bg.pids"
	ip link show lcaaaaaaaaaaa1
	ip link show lcbbbbbbbbbbb2
	nft list chain inet lcrun out_bbbbbbbbbbb2
	run "$NET_HARNESS" gc aaaaaaaaaaa1
	[ "$status" -eq 0 ]
	[ "$output" = 1 ]
	if ip link show lcbbbbbbbbbbb2; then false; fi
	if nft list chain inet lcrun out_bbbbbbbbbbb2; then false; fi
	[ ! -e "$LCRUN_STATE_DIR/net/bbbbbbbbbbb2.json" ]
	ip link show lcaaaaaaaaaaa1
	nft list chain inet lcrun out_aaaaaaaaaaa1
	[ -e "$LCRUN_STATE_DIR/net/aaaaaaaaaaa1.json" ]
	# gc again finds nothing more to do; the live one ends as usual.
	run "$NET_HARNESS" gc aaaaaaaaaaa1
	[ "$output" = 0 ]
	touch "$stop"
	wait $live
	no_leftovers
}

@test "bad --allow values: one line, exit 123, nothing made" {
	run sb --net allow --allow 10.0.0.1/8 -- true
	[ "$status" -eq 123 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == *"'10.0.0.1/8' has host bits set"* ]]
	run sb --net allow --allow 198.51.100.0/24:70000 -- true
	[ "$status" -eq 123 ]
	[[ "$output" == *"invalid port '70000' (expected 1-65535)"* ]]
	run sb --net allow --allow "[2001:db8::/32" -- true
	[ "$status" -eq 123 ]
	no_leftovers
}

@test "policies: unknown name 120, bad file 121 with its JSON path" {
	run sb --net-policy no-such-policy -- true
	[ "$status" -eq 120 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == *"unknown network policy 'no-such-policy'"* ]]
	cat >"$BATS_TEST_TMPDIR/p.json" <<-EOF
	{"mode": "allow", "allow": [{"cidr": "198.51.100.0/28"}, {"cidr": "203.0.113.0/24", "ports": ["https"]}]}
	EOF
	run sb --net-policy "$BATS_TEST_TMPDIR/p.json" -- true
	[ "$status" -eq 121 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == *"allow[1].ports[0]: expected an integer 1-65535"* ]]
	no_leftovers
}

@test "policies: a site file overrides the shipped model-api; blocked reaches nothing" {
	mkdir -p "$LCRUN_ETC_DIR/policies/net"
	cat >"$LCRUN_ETC_DIR/policies/net/model-api.json" <<-EOF
	{"mode": "allow", "allow": [{"cidr": "198.51.100.0/28", "ports": [443]}],
	 "hosts": {"api.anthropic.com": "$API4"}}
	EOF
	probe --net-policy model-api -- tcp,$API4,443 tcp,$API4,80 tcp,$PUB4,443 udp,$DNS4,53
	rm -rf "$LCRUN_ETC_DIR/policies"
	[ "$status" -eq 0 ]
	expect ok tcp,$API4,443
	expect fail tcp,$API4,80 tcp,$PUB4,443 udp,$DNS4,53
	probe --net-policy blocked -- tcp,$PUB4,443 udp,$PUB4,53
	expect fail tcp,$PUB4,443 udp,$PUB4,53
}

@test "an exhausted pool: exit 119, one line, the running sandbox keeps its lease" {
	local conf=$BATS_TEST_TMPDIR/small.json
	echo '{"net_pool": "10.214.0.0/30", "net_pool6": null}' >"$conf"
	LCRUN_CONFIG=$conf "${SB[@]}" --net allow --allow 198.51.100.0/28:443 -- sleep 3 &
	echo $! >>"$BATS_TEST_TMPDIR/bg.pids"
	for _ in $(seq 40); do [ "$(leases)" = 1 ] && break; sleep 0.05; done
	LCRUN_CONFIG=$conf run sb --net allow --allow 198.51.100.0/28:443 -- true
	[ "$status" -eq 119 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == *"the sandbox address pool 10.214.0.0/30 is exhausted"* ]]
	[ "$(leases)" = 1 ]
	[ "$(ip -o link show | grep -cE 'lc[0-9a-f]{12}')" = 1 ]
	wait
	no_leftovers
}

@test "a setup that fails half-way leaves no veth, chain or lease" {
	# IPv6 off inside: the veth exists when adding its IPv6 address fails.
	run "$NET_HARNESS" run --no-ipv6-inside --net allow --allow 198.51.100.0/28:443 -- true
	[ "$status" -eq 125 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == *"cannot set up the network of sandbox"*"in the sandbox: cannot add address fd6c:6372:ff00"* ]]
	no_leftovers
	# An interface of that name that someone else made is left alone.
	ip link add lc0000000000dd type veth peer name lcntdd
	run "$NET_HARNESS" run --id 0000000000dd --net allow --allow 198.51.100.0/28:443 -- true
	[ "$status" -ne 0 ]
	[ "${#lines[@]}" -eq 1 ]
	ip link show lc0000000000dd
	[ "$(leases)" = 0 ]
	if nft list chain inet lcrun out_0000000000dd; then false; fi
}

@test "a bad seccomp profile with a network: one line, exit 121, no veth, chain or lease left" {
	# With a network lcrun makes the seccomp program before anything of
	# the sandbox: this guards that order (or a later failure's clean-up,
	# should the program ever be made later, as for a run without one).
	printf '{\n  "defaultAction": "SCMP_ACT_ERRNO",\n  "syscalls": [ { "names": ["frobnicate_at"], "action": "SCMP_ACT_ALLOW" } ]\n}\n' >"$BATS_TEST_TMPDIR/bad.json"
	export LCRUN_ROOT="$BATS_TEST_TMPDIR/root"
	run "$LCRUN" run --net allow --allow 198.51.100.0/28:443 --seccomp "$BATS_TEST_TMPDIR/bad.json" -- true
	echo "$output"
	[ "$status" -eq 121 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == "lcrun: $BATS_TEST_TMPDIR/bad.json:3:"*'unknown syscall "frobnicate_at"'* ]]
	no_leftovers
	[ -z "$(ls "$LCRUN_ROOT/sandboxes" 2>/dev/null)" ]
	[ -z "$(find "$LCRUN_STATE_DIR" -mindepth 1 -maxdepth 1 -regextype egrep -regex '.*/[0-9a-f]{12}')" ]
}

@test "a base chain or the table someone deleted is made again before the next sandbox runs, and filters" {
	sb --net allow --allow 198.51.100.0/28:443 -- true # the table is there
	nft flush chain inet lcrun forward
	nft delete chain inet lcrun forward
	if nft list chain inet lcrun forward 2>/dev/null; then false; fi
	probe --net allow --allow 198.51.100.0/28:443 -- tcp,$API4,443 tcp,$API4,80
	[ "$status" -eq 0 ]
	expect ok tcp,$API4,443
	expect fail tcp,$API4,80
	nft list chain inet lcrun forward >/dev/null
	nft delete table inet lcrun
	probe --net allow --allow 198.51.100.0/28:443 -- tcp,$API4,443 tcp,$API4,80
	[ "$status" -eq 0 ]
	expect ok tcp,$API4,443
	expect fail tcp,$API4,80
	for c in forward input postrouting; do nft list chain inet lcrun $c >/dev/null; done
	wait
	no_leftovers
}

@test "inside lcrun: /etc/hosts pinned and read-only, resolver as given, network not changeable" {
	need_lcrun
	run "$LCRUN" run --net allow --allow 198.51.100.0/28:443 --add-host api.example:$API4 --dns $DNS4 -- \
		sh -c 'cat /etc/hosts; cat /etc/resolv.conf; echo x >>/etc/hosts && echo hosts-writable;
		       nft flush ruleset && echo nft-ok; ip route add 203.0.113.0/24 dev eth0 && echo route-ok;
		       ip addr add 203.0.113.99/32 dev eth0 && echo addr-ok; ip link set eth0 down && echo link-ok; true'
	[ "$status" -eq 0 ]
	[[ "$output" == *"$API4"*api.example* ]]
	[[ "$output" == *"nameserver $DNS4"* ]]
	[[ "$output" != *hosts-writable* ]]
	[[ "$output" != *nft-ok* ]]
	[[ "$output" != *route-ok* ]]
	[[ "$output" != *addr-ok* ]]
	[[ "$output" != *link-ok* ]]
	no_leftovers
}

@test "--net allow without root: exit 118, one line" {
	run setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$NET_HARNESS" validate --net allow --allow 198.51.100.0/28:443
	[ "$status" -eq 118 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == *"--net allow needs root"* ]]
}

@test "a host without nftables: exit 125, one line, nothing made" {
	local pre=()
	if nft list tables >/dev/null 2>&1; then
		# This kernel has nftables: make the sandbox's manager see one
		# without (a test double: socket(NETLINK_NETFILTER) fails).
		command -v cc >/dev/null || skip "no C compiler for the test double"
		cc -shared -fPIC -o "$BATS_TEST_TMPDIR/no-nfnetlink.so" "$NET_TESTS/no-nfnetlink.c" -ldl
		pre=(env LD_PRELOAD="$BATS_TEST_TMPDIR/no-nfnetlink.so")
	fi
	run "${pre[@]}" "${SB[@]}" --net allow --allow 198.51.100.0/28:443 -- true
	[ "$status" -eq 125 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == *"no usable nftables"* ]]
	[ "$(leases)" = 0 ]
	no_leftovers
}
