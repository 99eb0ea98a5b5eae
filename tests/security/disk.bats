#!/usr/bin/env bats
# A sandbox may fill its own disk and no more (--disk SIZE): its upper
# layer shares LCRUN_ROOT's filesystem with everything else there (lcd.db
# among it) unless it has a filesystem of its own.  Runs as root.

load ../integration/helpers

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root"
	[ -e /dev/loop-control ] || skip "no loop devices"
	command -v mkfs.ext4 >/dev/null || skip "no mkfs.ext4"
	S=$(mktemp -d /var/tmp/lcrun-sec-disk.XXXXXX)
	export LCRUN_ROOT=$S/root LCRUN_STATE_DIR=$S/state
	host_snapshot
}

teardown() {
	for id in $("$LCRUN" ps --json 2>/dev/null | jq -r '.[].id'); do "$LCRUN" rm -f "$id" >/dev/null 2>&1 || true; done
	"$LCRUN" gc --wait >/dev/null 2>&1 || true
	rm -rf "$S"
}

# No loop device holds a file under this test's root any more (each lets
# go once the last mount of its filesystem went with its sandbox).
loops_released() {
	for _ in $(seq 100); do
		losetup -a | grep -q "$S/" || return 0
		sleep 0.1
	done
	losetup -a | grep "$S/"
	return 1
}

@test "--disk: writes past SIZE fail with ENOSPC inside; the host's disk holds at most SIZE of them" {
	run "$LCRUN" run --disk 64M -- sh -c '
		dd if=/dev/zero of=/big bs=1M count=200 2>/tmp/dd.err; echo "dd exit $?"
		grep -o "No space left on device" /tmp/dd.err | head -1
		echo "big $(stat -c %s /big)"
		# /usr of the host image is on the same disk
		dd if=/dev/zero of=/usr/more bs=1M count=8 2>/dev/null; echo "usr exit $?"
		rm /big; echo x >/usr/more && echo "room again"'
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "$output" == *"dd exit 1"* ]]
	[[ "$output" == *"No space left on device"* ]]
	big=$(echo "$output" | sed -n 's/^big //p')
	[ "$big" -le $((64 << 20)) ]
	[ "$big" -ge $((48 << 20)) ]
	[[ "$output" == *"usr exit 1"* ]]
	[[ "$output" == *"room again"* ]]
	# without --disk the same write lands on the host's disk, as before
	run "$LCRUN" run -- sh -c 'dd if=/dev/zero of=/big bs=1M count=80 2>/dev/null; stat -c %s /big'
	[ "$output" = $((80 << 20)) ]
	loops_released
	assert_host_clean
}

@test "--disk: a created sandbox keeps its disk across stop and start; snapshots read it; rm leaves nothing" {
	id=$("$LCRUN" create --disk 32M)
	"$LCRUN" exec "$id" -- sh -c 'echo kept >/root/f && mkdir -p /usr/local/x && echo u >/usr/local/x/g'
	img=$LCRUN_ROOT/sandboxes/$id/private/disk.img
	[ "$(stat -c '%a %U' "$img")" = "600 root" ]
	# sparse: what is used, not SIZE
	[ "$(du -k "$img" | cut -f1)" -lt 16384 ]
	# nothing of it on the host's side: the uppers are on the disk, which
	# is mounted in the sandbox's namespaces only
	[ -z "$(ls -A "$LCRUN_ROOT/sandboxes/$id/private/ovl")" ]
	! grep -q "$S/" /proc/self/mountinfo
	"$LCRUN" snapshot "$id" running-snap >/dev/null
	[ "$("$LCRUN" run --image running-snap -- cat /root/f /usr/local/x/g)" = "kept
u" ]
	"$LCRUN" stop "$id"
	loops_released
	"$LCRUN" snapshot "$id" stopped-snap >/dev/null
	[ "$("$LCRUN" run --image stopped-snap -- cat /root/f)" = kept ]
	"$LCRUN" start "$id"
	[ "$("$LCRUN" exec "$id" -- cat /root/f)" = kept ]
	run "$LCRUN" exec "$id" -- sh -c 'dd if=/dev/zero of=/fill bs=1M count=64 2>&1 >/dev/null | grep -c "No space"'
	[ "$output" = 1 ]
	"$LCRUN" rm -f "$id"
	"$LCRUN" gc --wait >/dev/null
	loops_released
	assert_host_clean
}

@test "--disk: bad sizes, --upper-dir, rootless and more than the host has are refused in one line" {
	run "$LCRUN" run --disk 1M -- true
	[ "$status" -eq 123 ]
	[ "$output" = "lcrun: --disk 1 MiB: at least 16 MiB" ]
	run "$LCRUN" run --disk lots -- true
	[ "$status" -eq 123 ]
	[ "$output" = "lcrun: --disk 'lots': expected a size like 512M, 10G or bytes" ]
	mkdir -p "$S/up"
	run "$LCRUN" run --disk 32M --upper-dir "$S/up" -- true
	[ "$status" -eq 123 ]
	[ "${#lines[@]}" -eq 1 ]
	run "$LCRUN" run --disk 1000T -- true
	[ "$status" -eq 125 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == "lcrun: --disk 1048576000 MiB: only "*" MiB free on $LCRUN_ROOT: No space left on device" ]]
	rootless_copy
	run as_user "$(rootless_user)" env -u LCRUN_ROOT -u LCRUN_STATE_DIR LCRUN_POLICY_DIR="$RL/policies" \
		"$RL/lcrun" run --disk 32M -- true
	rm -rf "$RL"
	echo "$output"
	[ "$status" -eq 118 ]
	[[ "$output" == "lcrun: --disk (a loop device and a mount) needs root"* ]]
	assert_host_clean
}
