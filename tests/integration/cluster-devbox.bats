#!/usr/bin/env bats
# Devboxes in a cluster (cluster-lib.bash: lcd nodes sharing one private
# PostgreSQL store): a box lives on the node it was made on, and the real
# OpenSSH client reaches it through any node, whose lcd splices the
# connection through to the box's node.  Needs root, PostgreSQL's server,
# the OpenSSH client and the host's sshd (the host image's).

load lcd-lib
load cluster-lib

setup() {
	cluster_setup
	command -v ssh >/dev/null && command -v mkfs.ext4 >/dev/null || skip "needs ssh and mkfs.ext4"
	[ -x /usr/sbin/sshd ] || skip "the host image needs the host's sshd (openssh-server: contrib/install-deps)"
	export HOME="$T/home"
	mkdir -p -m 0700 "$HOME/.ssh"
	KEY="$HOME/.ssh/id_ed25519"
	ssh-keygen -q -t ed25519 -N '' -C cluster-devbox-test -f "$KEY"
	SSHO=(-i "$KEY" -o BatchMode=yes -o ConnectTimeout=60)
}

teardown() {
	cluster_teardown_keep
	# the boxes' disks stay mounted (lcd/disks/NAME) until deleted
	awk -v r="$T/" 'index($5, r) == 1 { print $5 }' /proc/self/mountinfo | sort -r | while read -r m; do
		umount "$m" 2>/dev/null || umount -l "$m"
	done
	cluster_teardown
}

# cluster_teardown, without removing $T yet (the disks are mounted in it)
cluster_teardown_keep() {
	local i
	for i in 1 2 3; do node_stop "$i"; done
	for i in 1 2 3; do
		[ -d "$T/n$i" ] || continue
		LCRUN_ROOT="$T/n$i/root" LCRUN_STATE_DIR="$T/n$i/state" node_leftovers_remove "$i" || true
	done
}

box_ssh() { # I NAME CMD…: ssh to box NAME through node I, as lcctl ssh-config writes it
	local i=$1 name=$2
	shift 2
	env $(node_env "$i") ssh -F "$HOME/.ssh/config" "${SSHO[@]}" "lcrun-$name" "$@"
}

@test "cluster: a devbox made on node 2 is reached with ssh through node 1; it runs on node 2 and stays up" {
	node_start 1
	node_start 2
	ctl 2 devbox create b1 --image host --disk 64M
	[ "$(lcd_sql "SELECT node FROM devboxes WHERE name = 'b1'")" = node2 ]
	# node 1's ssh-config: the ProxyCommand goes through node 1's socket
	ctl 1 ssh-config
	grep -qF -- "--socket '$T/n1/lcd.sock' devbox 'b1' proxy" "$HOME/.ssh/config"
	run box_ssh 1 b1 'echo "out:$(id -un):$(hostname):$LCRUN_DEVBOX"; echo err >&2; exit 7'
	echo "$output"
	[ "$status" -eq 7 ]
	[[ "$output" == *"out:agent:b1:b1"* ]]
	[[ "$output" == *err* ]]
	# the box runs on node 2: its runtime has the sandbox, node 1's does not
	ctl 1 devbox show b1 | jq -e '.node == "node2" and .state == "running" and .sessions == 0'
	sid=$(ctl 1 devbox show b1 | jq -r .sandbox)
	[ "$(env $(node_env 2) "$LCRUN" inspect "$sid" | jq -r .status)" = running ]
	run env $(node_env 1) "$LCRUN" inspect "$sid"
	[ "$status" -ne 0 ]
	grep -q "devbox b1: session opened" "$T/n2/lcd.log"
	if grep -q "devbox b1:" "$T/n1/lcd.log"; then false; fi
	# the host key pinned through node 1 is the box's
	fp=$(ssh-keygen -lf <(sed -n 's/^lcrun-b1 //p' "$HOME/.ssh/lcrun_known_hosts") | awk '{ print $2 }')
	[ "$fp" = "$(ctl 1 devbox show b1 | jq -r .host_key_fingerprint)" ]
	# the other node leaves the box alone: still up, the same sandbox,
	# after node 1's keep_warm sweeps (each second)
	sleep 3
	ctl 1 devbox show b1 | jq -e --arg s "$sid" '.state == "running" and .sandbox == $s'
	# node 1's list says so too, from the store
	ctl 1 devbox ls --json | jq -e --arg s "$sid" '.[] | select(.name == "b1") | .node == "node2" and .state == "running" and .sandbox == $s'
	# lcctl devbox NAME ssh through node 1, a file written and read back
	run ctl 1 devbox b1 ssh "${SSHO[@]}" -- 'echo kept > ~/mark && cat ~/mark'
	[ "$status" -eq 0 ]
	[ "$output" = kept ]
	# stopped and removed through node 1: on node 2
	ctl 1 devbox stop b1
	[ "$(ctl 2 devbox show b1 | jq -r .state)" = stopped ]
	run env $(node_env 2) "$LCRUN" inspect "$sid"
	[ "$status" -ne 0 ]
	ctl 1 devbox rm b1
	[ -z "$(lcd_sql "SELECT name FROM devboxes")" ]
	ctl 2 disk delete b1
}

@test "cluster: a devbox whose node died (its host with it) starts again on that node when it returns; its disk kept everything" {
	node_start 1
	node_start 2
	ctl 2 devbox create b2 --image host --disk 64M
	run ctl 1 devbox b2 ssh "${SSHO[@]}" -- 'echo before > ~/mark; sync'
	[ "$status" -eq 0 ]
	sid=$(ctl 2 devbox show b2 | jq -r .sandbox)
	# node 2's host goes: lcd killed, the box's sandbox gone, its disk unmounted
	node_kill 2
	env $(node_env 2) "$LCRUN" rm -f "$sid" >/dev/null
	umount "$T/n2/root/lcd/disks/b2"
	# while node 2 is away the box cannot be reached, and says why
	run ctl 1 devbox b2 ssh "${SSHO[@]}" -- true
	echo "$output"
	[ "$status" -ne 0 ]
	[[ "$output" == *node2* ]]
	# judged dead after 30 s: the box's sandbox is lost, the box stays node 2's
	for _ in $(seq 450); do [ "$(lcd_sql "SELECT state FROM sandboxes WHERE id = '$sid'")" = lost ] && break; sleep 0.1; done
	[ "$(lcd_sql "SELECT state FROM sandboxes WHERE id = '$sid'")" = lost ]
	[ "$(lcd_sql "SELECT node FROM devboxes WHERE name = 'b2'")" = node2 ]
	ctl 1 devbox ls --json | jq -e '.[] | select(.name == "b2") | .node == "node2" and .state == "stopped"'
	# node 2 returns: the box is stopped there, and a login through node 1
	# starts it again, on node 2, on the same disk
	node_start 2
	ctl 1 devbox show b2 | jq -e '.state == "stopped" and .node == "node2"'
	run ctl 1 devbox b2 ssh "${SSHO[@]}" -- 'cat ~/mark'
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$output" = before ]
	new=$(ctl 1 devbox show b2 | jq -r 'select(.state == "running" and .node == "node2") | .sandbox')
	[ -n "$new" ] && [ "$new" != "$sid" ]
	[ "$(env $(node_env 2) "$LCRUN" inspect "$new" | jq -r .status)" = running ]
	[ -z "$(lcd_sql "SELECT id FROM sandboxes WHERE id = '$sid'")" ]
	ctl 1 devbox stop b2
	ctl 1 devbox rm b2
	ctl 2 disk delete b2
}
