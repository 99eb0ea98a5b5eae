#!/usr/bin/env bats
# Devboxes as their users meet them: the real OpenSSH client (ssh, scp)
# through `lcctl devbox NAME ssh` and `lcctl ssh-config`, lcd splicing the
# connection into the box's network namespace, a disk of each box's own.
# A private lcd per test (lcd-lib.bash); most boxes run on the host image
# (the host's sshd), one on images/agent-box.json.  Needs root.

load helpers
load devbox-lib

FIXTURES="$BATS_TEST_DIRNAME/../fixtures/lcd"

setup() {
	dbx_setup
}

teardown() {
	dbx_teardown
}

@test "a login through lcd runs a command: output, exit status, the pinned host key; nothing listens on the host" {
	need_host_sshd
	listening() { ss -Hltn | awk '{ print $4 }' | sort; }
	before=$(listening)
	run "$LCCTL" devbox create b1 --image host --disk 64M
	[ "$status" -eq 0 ]
	[ "$(dbx_state b1)" = stopped ]
	run dbx_ssh b1 'echo "out:$(id -un):$(hostname):$HOME:$LCRUN_DEVBOX"; echo err >&2; exit 7'
	[ "$status" -eq 7 ]
	[[ "$output" == *"out:agent:b1:/home/agent:b1"* ]]
	[[ "$output" == *err* ]]
	[ "$(dbx_state b1)" = running ]
	# the host key lcd reports is the one ssh checked (StrictHostKeyChecking=yes)
	grep -q '^lcrun-b1 ssh-ed25519 ' "$HOME/.ssh/lcrun_known_hosts"
	fp=$(ssh-keygen -lf <(sed 's/^lcrun-b1 //' "$HOME/.ssh/lcrun_known_hosts") | awk '{ print $2 }')
	[ "$fp" = "$("$LCCTL" devbox show b1 | jq -r .host_key_fingerprint)" ]
	# a wrong pinned key is refused
	sed -i 's/^lcrun-b1 .*/lcrun-b1 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ1y0b6c7kLqW0o8yMRIz3rQxv2nN0Gx0T0h8vOSVmbX/' \
		"$HOME/.ssh/lcrun_known_hosts"
	run ssh "${SSHO[@]}" -o "ProxyCommand=$LCCTL devbox b1 proxy" -o HostKeyAlias=lcrun-b1 \
		-o "UserKnownHostsFile=$HOME/.ssh/lcrun_known_hosts" -o StrictHostKeyChecking=yes agent@lcrun-b1 true
	[ "$status" -eq 255 ]
	[[ "$output" == *"HOST IDENTIFICATION HAS CHANGED"* ]]
	# ... and the proxy pins the right one again
	run dbx_ssh b1 true
	[ "$status" -eq 0 ]
	# sshd listens inside the box only
	[ "$(listening)" = "$before" ]
	run dbx_ssh b1 'ss -Hltn 2>/dev/null || cat /proc/net/tcp'
	[[ "$output" == *"127.0.0.1:22"* || "$output" == *"0100007F:0016"* ]]
	run "$LCCTL" devbox stop b1
	[ "$status" -eq 0 ]
	run "$LCCTL" disk delete b1
	[ "$status" -eq 0 ]
}

@test "over lcd's TCP listener (LCD_URL): a login silent for longer than listen_idle_timeout keeps its session" {
	need_host_sshd
	stop_lcd
	# TCP only inside a network namespace of this test's own: nothing leaves it.
	start_lcd_tcp "dbxtcp$$" 7073 '"listen_idle_timeout": 2'
	export LCD_URL=http://127.0.0.1:7073 LCD_TOKEN="$(cat "$T/token")"
	run ip netns exec "$NS" "$LCCTL" devbox create b1 --image host --disk 64M
	[ "$status" -eq 0 ]
	# the upgraded connection (SSH inside it) is lcd's work, not an idle wait
	run ip netns exec "$NS" "$LCCTL" devbox b1 ssh "${SSHO[@]}" -- 'sleep 5; echo "still here after 5 s"'
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"still here after 5 s"* ]]
	run ip netns exec "$NS" "$LCCTL" devbox b1 ssh "${SSHO[@]}" -- 'echo "second login"'
	[ "$status" -eq 0 ]
	[[ "$output" == *"second login"* ]]
}

@test "scp of 20 MiB both ways through lcctl ssh-config is byte-identical; --prune drops the block of a removed box" {
	need_host_sshd
	"$LCCTL" devbox create b1 --image host --disk 128M
	"$LCCTL" devbox create b2 --image host --disk 64M
	printf 'Host other\n  User nobody\n' >"$HOME/.ssh/config"
	run "$LCCTL" ssh-config
	[ "$status" -eq 0 ]
	grep -q '^Host lcrun-b1$' "$HOME/.ssh/config"
	grep -q '^Host lcrun-b2$' "$HOME/.ssh/config"
	grep -q '^Host other$' "$HOME/.ssh/config"
	head -c 20971520 /dev/urandom >"$T/up"
	run scp -F "$HOME/.ssh/config" -i "$KEY" -o BatchMode=yes "$T/up" lcrun-b1:/home/agent/up
	[ "$status" -eq 0 ]
	run ssh -F "$HOME/.ssh/config" -i "$KEY" -o BatchMode=yes lcrun-b1 'sha256sum /home/agent/up'
	[ "$status" -eq 0 ]
	[ "${output%% *}" = "$(sha256sum <"$T/up" | cut -d' ' -f1)" ]
	run scp -F "$HOME/.ssh/config" -i "$KEY" -o BatchMode=yes lcrun-b1:/home/agent/up "$T/down"
	[ "$status" -eq 0 ]
	cmp "$T/up" "$T/down"
	# again: the blocks are replaced, not added
	"$LCCTL" ssh-config
	[ "$(grep -c '^Host lcrun-b1$' "$HOME/.ssh/config")" -eq 1 ]
	"$LCCTL" devbox rm b2
	"$LCCTL" ssh-config
	grep -q '^Host lcrun-b2$' "$HOME/.ssh/config" # kept without --prune
	run "$LCCTL" ssh-config --prune
	[ "$status" -eq 0 ]
	[[ "$output" == *"pruned 1 block"* ]]
	if grep -q 'lcrun-b2' "$HOME/.ssh/config"; then false; fi
	grep -q '^Host lcrun-b1$' "$HOME/.ssh/config"
	grep -q '^Host other$' "$HOME/.ssh/config"
	"$LCCTL" devbox stop b1
	"$LCCTL" disk delete b1
	# b2 never started: its disk was never made
	run "$LCCTL" disk delete b2
	[ "$status" -eq 120 ]
	[ "$output" = "lcctl: no disk named 'b2'" ]
}

@test "agent-box: sudo; /home/agent and a package in /usr/local survive stop, start and kill -9 of lcd; same host key; tmux dies with the stop" {
	agent_box_image
	run "$LCCTL" devbox create ab --image agent-box --disk 1G
	[ "$status" -eq 0 ]
	run dbx_ssh ab 'set -e
		whoami; sudo -n id -u; grep -E "^(NoNewPrivs|Seccomp):" /proc/self/status
		command -v claude codex gh jq rg tmux python3 git sshd >/dev/null && echo tools
		echo notes-1 > ~/notes.txt
		d=$(mktemp -d); mkdir -p $d/DEBIAN $d/usr/local/bin
		printf "Package: dbx-hello\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@t>\nDescription: test\n" > $d/DEBIAN/control
		printf "#!/bin/sh\necho hello from a package\n" > $d/usr/local/bin/dbx-hello; chmod 755 $d/usr/local/bin/dbx-hello
		dpkg-deb -b $d /tmp/dbx-hello.deb >/dev/null; sudo dpkg -i /tmp/dbx-hello.deb >/dev/null
		tmux new-session -d -s work && tmux ls'
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *agent*0* ]]
	[[ "$output" == *"NoNewPrivs:	0"* ]]
	[[ "$output" == *"Seccomp:	2"* ]]
	[[ "$output" == *tools* ]]
	[[ "$output" == *"work: 1 windows"* ]]
	key=$(cat "$HOME/.ssh/lcrun_known_hosts")
	check() {
		run dbx_ssh ab 'cat ~/notes.txt; dbx-hello; dpkg -s dbx-hello | grep ^Status; tmux ls 2>&1; echo "tmux=$?"'
		echo "$output"
		[ "$status" -eq 0 ]
		[[ "$output" == *notes-1* ]]
		[[ "$output" == *"hello from a package"* ]]
		[[ "$output" == *"install ok installed"* ]]
		[ "$(cat "$HOME/.ssh/lcrun_known_hosts")" = "$key" ]
	}
	"$LCCTL" devbox stop ab
	[ "$(dbx_state ab)" = stopped ]
	check
	# tmux ended with the stop: no server, no session
	[[ "$output" == *"tmux=1"* ]]
	[[ "$output" != *"work:"* ]]
	# lcd dies; the box does not, and the next lcd serves it
	sid=$("$LCCTL" devbox show ab | jq -r .sandbox)
	kill -9 "$LCD_PID"
	wait "$LCD_PID" 2>/dev/null || true
	LCD_PID=
	[ "$("$LCRUN" inspect "$sid" | jq -r .status)" = running ]
	start_lcd
	[ "$(dbx_state ab)" = running ]
	check
	[ "$("$LCCTL" devbox show ab | jq -r .sandbox)" = "$sid" ]
	"$LCCTL" devbox stop ab
	"$LCCTL" devbox start ab
	check
	"$LCCTL" devbox stop ab
	"$LCCTL" disk delete ab
}

@test "keep_warm: stopped after the last session closes, never while one is open; connecting to a stopped box starts it" {
	need_host_sshd
	"$LCCTL" devbox create kw --image host --disk 64M --keep-warm 2
	run dbx_ssh kw true
	[ "$status" -eq 0 ]
	[ "$(dbx_state kw)" = running ]
	t0=$(date +%s%N)
	dbx_wait_state kw stopped 15
	t1=$(date +%s%N)
	[ $(( (t1 - t0) / 1000000 )) -ge 1500 ] # not before keep_warm
	[[ "$("$LCCTL" devbox show kw | jq -r .stop_reason)" == *keep_warm* ]]
	# connecting starts it again, in one command
	run dbx_ssh kw 'cat /etc/hostname'
	[ "$status" -eq 0 ]
	[ "$output" = kw ]
	# a session open for longer than keep_warm keeps it running
	dbx_ssh kw 'sleep 6' &
	pid=$!
	sleep 4.5
	[ "$(dbx_state kw)" = running ]
	[ "$("$LCCTL" devbox show kw | jq -r .sessions)" = 1 ]
	wait "$pid"
	# the server's side of the session ends just after the client's
	for _ in $(seq 100); do [ "$("$LCCTL" devbox show kw | jq -r .sessions)" = 0 ] && break; sleep 0.1; done
	[ "$("$LCCTL" devbox show kw | jq -r .sessions)" = 0 ]
	dbx_wait_state kw stopped 15
	"$LCCTL" disk delete kw
}

@test "secrets reach every login's environment from the store at each start, never the disk, state or logs" {
	need_host_sshd
	v1="dbx-\"s3cr3t\" \$HOME \\x $RANDOM$RANDOM"
	printf '%s' "$v1" | "$LCCTL" secret set DBX_TOKEN
	"$LCCTL" devbox create sb --image host --disk 64M --secret DBX_TOKEN
	run dbx_ssh sb 'printf "%s" "$DBX_TOKEN"'
	[ "$status" -eq 0 ]
	[ "$output" = "$v1" ]
	run dbx_ssh sb 'printenv DBX_TOKEN | wc -c' # every session, not the first only
	[ "$output" -eq $(( ${#v1} + 1 )) ]
	v2="second-$RANDOM$RANDOM"
	printf '%s' "$v2" | "$LCCTL" secret set DBX_TOKEN
	"$LCCTL" devbox stop sb
	run dbx_ssh sb 'printf "%s" "$DBX_TOKEN"'
	[ "$output" = "$v2" ]
	"$LCCTL" devbox stop sb
	sync
	img="$LCRUN_ROOT/lcd/disks/sb.img"
	[ -s "$img" ]
	for v in "$v1" "$v2"; do
		run grep -c -a -F -- "$v" "$img"
		[ "$output" = 0 ]
		if grep -r -a -q -F -- "$v" "$LCRUN_STATE_DIR" "$T/lcd.log"; then false; fi
		if grep -r -a -q -F -- "$v" "$LCRUN_ROOT/lcd/logs" "$LCRUN_ROOT/sandboxes"; then false; fi
	done
	# a value that sshd's SetEnv cannot carry is refused, naming the secret
	printf 'a\nb' | "$LCCTL" secret set DBX_TOKEN
	run dbx_ssh sb true
	[ "$status" -ne 0 ]
	[[ "$output" == *"DBX_TOKEN: a line break cannot pass"* ]]
	[ "$(dbx_state sb)" = stopped ]
	"$LCCTL" disk delete sb
}

@test "a full disk is ENOSPC inside and the host is unharmed; disk delete of a running box is refused; two boxes' disks are isolated" {
	need_host_sshd
	"$LCCTL" devbox create da --image host --disk 64M
	"$LCCTL" devbox create db --image host --disk 64M
	# what the host gave the disk: its image's blocks (not the filesystem's
	# free space, which other writers on the host move too)
	used_kb() { du -k "$LCRUN_ROOT/lcd/disks/da.img" | cut -f1; }
	before=$(used_kb)
	run dbx_ssh da 'dd if=/dev/zero of=/home/agent/fill bs=1M count=256; echo "dd=$?"; df -Pk / | tail -1'
	echo "$output"
	[[ "$output" == *"No space left on device"* ]]
	[[ "$output" == *"dd=1"* ]]
	size_kb=$(echo "$output" | tail -1 | awk '{ print $2 }')
	[ "$size_kb" -lt 65536 ] # df in the box: the disk's size
	sync
	after=$(used_kb)
	[ "$after" -gt $(( before + 32 * 1024 )) ] # the writes went to the disk's image...
	[ "$after" -le $(( 64 * 1024 + 64 )) ] # ... which the host gave its size, not more
	head -c 1048576 /dev/zero >"$T/host-still-writes"
	run dbx_ssh da 'rm /home/agent/fill && echo again > /home/agent/ok && cat /home/agent/ok'
	[ "$output" = again ]
	# refused while the box runs, nothing lost
	run "$LCCTL" disk delete da
	[ "$status" -eq 117 ]
	[[ "$output" == *"disk da is in use: devbox da runs"* ]]
	run dbx_ssh da 'cat /home/agent/ok'
	[ "$output" = again ]
	# isolation: each box sees its own disk only
	marker_a="marker-of-a-$RANDOM$RANDOM"
	marker_b="marker-of-b-$RANDOM$RANDOM"
	dbx_ssh da "echo $marker_a > ~/mine; sync"
	dbx_ssh db "echo $marker_b > ~/mine; sync"
	[ "$(dbx_ssh da 'cat ~/mine')" = "$marker_a" ]
	[ "$(dbx_ssh db 'cat ~/mine')" = "$marker_b" ]
	run dbx_ssh db "grep -c disks/da /proc/self/mountinfo; ls /home/agent"
	[[ "$output" == 0* ]]
	[[ "$output" != *ok* ]]
	"$LCCTL" devbox stop da
	"$LCCTL" devbox stop db
	sync
	[ "$(grep -c -a -F "$marker_a" "$LCRUN_ROOT/lcd/disks/da.img")" -ge 1 ]
	[ "$(grep -c -a -F "$marker_b" "$LCRUN_ROOT/lcd/disks/da.img")" -eq 0 ]
	[ "$(grep -c -a -F "$marker_b" "$LCRUN_ROOT/lcd/disks/db.img")" -ge 1 ]
	[ "$(grep -c -a -F "$marker_a" "$LCRUN_ROOT/lcd/disks/db.img")" -eq 0 ]
	run "$LCCTL" disk delete da
	[ "$status" -eq 0 ]
	"$LCCTL" disk delete db
	run "$LCCTL" disk ls --json
	[ "$output" = "[]" ]
}

@test "a manifest's devboxes: an app of devboxes only, the deployer's keys, its own user; app delete keeps the disk" {
	need_host_sshd
	echo "tok-$RANDOM" | "$LCCTL" secret set DBX_TOKEN
	run "$LCCTL" deploy "$FIXTURES/devbox-app.json"
	[ "$status" -eq 0 ]
	run "$LCCTL" devbox ls --json
	[ "$(echo "$output" | jq -r '.[0].app')" = dbxapp ]
	[ "$(echo "$output" | jq -r '.[0].authorized_keys[0]')" = "$(cat "$KEY.pub")" ]
	run dbx_ssh mybox 'id -un; echo data > ~/kept; test -n "$DBX_TOKEN" && echo has-token'
	[ "$status" -eq 0 ]
	[ "$output" = "dev
has-token" ]
	# another name's box may not take it, lcctl may not remove it
	run "$LCCTL" devbox create mybox --image host
	[ "$status" -eq 119 ]
	run "$LCCTL" devbox rm mybox
	[ "$status" -eq 118 ]
	[[ "$output" == *"belongs to app dbxapp"* ]]
	# redeploy keeps the running box and its disk
	"$LCCTL" deploy "$FIXTURES/devbox-app.json"
	[ "$(dbx_ssh mybox 'cat ~/kept')" = data ]
	run "$LCCTL" app delete dbxapp
	[ "$status" -eq 0 ]
	[ "$("$LCCTL" devbox ls --json)" = "[]" ]
	run "$LCCTL" disk ls --json
	[ "$(echo "$output" | jq -r '.[0].name')" = mybox ]
	[ "$(echo "$output" | jq -r '.[0].devbox')" = null ]
	# a new box of that name finds the disk as it was
	"$LCCTL" devbox create mybox --image host --user dev
	[ "$(dbx_ssh mybox 'cat ~/kept')" = data ]
	"$LCCTL" devbox rm mybox
	"$LCCTL" disk delete mybox
}

@test "bad input: one line, its exit code, nothing made" {
	run "$LCCTL" devbox create bad --image host --disk 1M
	[ "$status" -eq 121 ]
	[ "$output" = "lcctl: disk: expected a size like \"50G\" or bytes, 32 MiB to 16384 GiB" ]
	run "$LCCTL" devbox create Bad --image host
	[ "$status" -eq 121 ]
	[[ "$output" == "lcctl: name: bad devbox name"* ]]
	run "$LCCTL" devbox create bad --image no-such-image
	[ "$status" -eq 120 ]
	[[ "$output" == "lcctl: image: "* ]]
	run "$LCCTL" devbox create bad --image host --secret NOPE
	[ "$status" -eq 120 ]
	[ "$output" = "lcctl: secrets[0]: no secret named 'NOPE'" ]
	run "$LCCTL" devbox create bad --image host --net no-such-policy
	[ "$status" -eq 120 ]
	run "$LCCTL" devbox create bad --image host --authorized-keys "$T/nope.pub"
	[ "$status" -eq 122 ]
	echo "not a key" >"$T/bad.pub"
	run "$LCCTL" devbox create bad --image host --authorized-keys "$T/bad.pub"
	[ "$status" -eq 121 ]
	[[ "$output" == "lcctl: authorized_keys[0]: expected a public key line"* ]]
	run "$LCCTL" devbox create bad --image host --frobnicate
	[ "$status" -eq 123 ]
	[ "$("$LCCTL" devbox ls --json)" = "[]" ]
	for verb in show start stop rm; do
		run "$LCCTL" devbox "$verb" nope
		[ "$status" -eq 120 ]
		[ "$output" = "lcctl: no devbox named 'nope'" ]
	done
	run "$LCCTL" devbox nope ssh "${SSHO[@]}" -- true
	[ "$status" -eq 120 ]
	run "$LCCTL" devbox nope proxy </dev/null
	[ "$status" -eq 120 ]
	run "$LCCTL" disk delete nope
	[ "$status" -eq 120 ]
	"$LCCTL" devbox create quiet --image host --disk 64M
	run "$LCCTL" devbox stop quiet
	[ "$status" -eq 117 ]
	# the connect route speaks only its upgrade
	run api POST /devboxes/quiet/connect
	[ "$(echo "$output" | tail -1)" = 400 ]
	[ "$(dbx_state quiet)" = stopped ]
	run "$LCCTL" disk ls --json
	[ "$output" = "[]" ]
	"$LCCTL" devbox rm quiet
}

@test "runtime: --upper-dir keeps the writes, --allow-new-privs lets setuid work with seccomp on, --sysctl sets the sandbox's own" {
	up="$R/upper"
	mkdir -p "$up"
	"$LCRUN" run --upper-dir "$up" -- sh -c 'cp /usr/bin/id /idsu && chmod 4755 /idsu && echo kept > /root/f'
	[ -u "$up/upper/idsu" ]
	run "$LCRUN" run --upper-dir "$up" -u 1000 -- /idsu -u
	[ "$output" = 1000 ] # no_new_privs: the setuid bit does nothing
	run "$LCRUN" run --upper-dir "$up" -u 1000 --allow-new-privs -- sh -c '/idsu -u; grep -E "^(NoNewPrivs|Seccomp):" /proc/self/status'
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = 0 ]
	[[ "$output" == *"NoNewPrivs:	0"* ]]
	[[ "$output" == *"Seccomp:	2"* ]]
	run "$LCRUN" run --upper-dir "$up" -- cat /root/f
	[ "$output" = kept ]
	host=$(cat /proc/sys/net/ipv4/ip_unprivileged_port_start)
	run "$LCRUN" run --sysctl net.ipv4.ip_unprivileged_port_start=0 -- cat /proc/sys/net/ipv4/ip_unprivileged_port_start
	[ "$output" = 0 ]
	[ "$(cat /proc/sys/net/ipv4/ip_unprivileged_port_start)" = "$host" ]
	run "$LCRUN" run --sysctl kernel.hostname=x -- true
	[ "$status" -eq 123 ]
	run "$LCRUN" run --sysctl net.no.such.key=1 -- true
	[ "$status" -eq 123 ]
	[[ "$output" == *"sysctl net.no.such.key in the sandbox's network namespace"* ]]
	run "$LCRUN" run --upper-dir "$R/nope" -- true
	[ "$status" -eq 122 ]
}
