#!/usr/bin/env bats
# Power loss: lcd in run-vm's guest on a disk of its own (a raw ext4 image
# this test makes, the guest's /dev/vda, holding /var/lib/lcrun and with it
# lcd.db, lcd's key and the image store).  Each boot checks what the boots
# before it were told was done, then sets secrets, deploys apps, spawns
# tasks, makes sandboxes and snapshots, printing each acknowledgement as it
# comes back, until the power is cut at a random point (the guest's
# `echo b >/proc/sysrq-trigger`: a reset without a sync, so whatever the
# guest's kernel had not written to its disk is lost, as at a power cut).
# The next boot on the same disk checks (tests/vm/powerloss-guest): lcd.db
# passes PRAGMA integrity_check, lcd starts, every acknowledged operation
# is there, no half-written image is listed, no sandbox is said running
# that is not, no task stays running.
#
# LCRUN_POWERLOSS_CUTS="S S ..." gives the cut points (seconds into the
# operations, one boot each) instead of the random ones, to repeat a run.

bats_require_minimum_version 1.5.0

setup() {
	[ "$(id -u)" = 0 ] || skip "the VM harness runs as root"
	command -v qemu-system-x86_64 >/dev/null || skip "needs qemu-system-x86_64"
	[ -x /bin/busybox ] || skip "needs busybox-static"
	ls /boot/vmlinuz-* >/dev/null 2>&1 || skip "needs a kernel in /boot (linux-image-amd64)"
	for t in mkfs.ext4 sqlite3 jq; do
		command -v $t >/dev/null || skip "needs $t"
	done
	export LCRUN=${LCRUN:-$BATS_TEST_DIRNAME/../../build/lcrun}
	BIN=$(cd "$(dirname "$LCRUN")" && pwd)
	[ -x "$BIN/lcd" ] && [ -x "$BIN/lcctl" ] || skip "no lcd and lcctl beside $LCRUN (make first)"
	export LCRUN=$BIN/lcrun
	TOP=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
}

boot() { # ARGS of powerloss-guest: one boot on the test's disk
	run --separate-stderr "$BATS_TEST_DIRNAME/run-vm" --timeout 300 --disk "$BATS_TEST_TMPDIR/disk.img" \
		--share "$TOP" --share "$BIN" -- "$BATS_TEST_DIRNAME/powerloss-guest" "$@"
	echo "--- boot: powerloss-guest $* (status $status)"
	echo "$output"
	[ -z "$stderr" ] || echo "run-vm: $stderr"
}

@test "power loss: what lcd acknowledged before a cut at a random point is there after the reboot" {
	local cuts
	if [ -n "${LCRUN_POWERLOSS_CUTS:-}" ]; then
		read -r -a cuts <<<"$LCRUN_POWERLOSS_CUTS"
	else
		cuts=($((5 + RANDOM % 21)) $((5 + RANDOM % 21)) $((5 + RANDOM % 21)))
	fi
	echo "cut points: ${cuts[*]} (LCRUN_POWERLOSS_CUTS repeats them)"
	truncate -s 4G "$BATS_TEST_TMPDIR/disk.img"
	mkfs.ext4 -q -F "$BATS_TEST_TMPDIR/disk.img"
	cd "$BATS_TEST_TMPDIR"
	: >acks
	for c in "${cuts[@]}"; do
		boot cut acks "$c"
		# the checks of the boots before held, and the power was cut
		[[ "$output" != *"FAIL:"* ]]
		[ "$status" -eq 123 ]
		[[ "$output" == *"cut: power cut $c s into the operations"* ]]
		grep '^ack ' <<<"$output" >>acks || true
	done
	echo "acknowledged in all: $(grep -c '^ack ' acks) ($(cut -d' ' -f2 acks | sort | uniq -c | tr -s ' ' | tr '\n' ','))"
	# operations were acknowledged (the cuts did not all come first)
	grep -q '^ack task ' acks
	boot check acks
	[[ "$output" != *"FAIL:"* ]]
	[ "$status" -eq 0 ]
}
