#!/usr/bin/env bats
# The VM harness itself (tests/vm/run-vm): the guest is a pure cgroup v2
# machine over the host's files, and run-vm hands back output and status.
# Each test boots one VM (about 3 s under TCG).

bats_require_minimum_version 1.5.0

setup() {
	[ "$(id -u)" = 0 ] || skip "the VM harness runs as root"
	command -v qemu-system-x86_64 >/dev/null || skip "needs qemu-system-x86_64"
	[ -x /bin/busybox ] || skip "needs busybox-static"
	ls /boot/vmlinuz-* >/dev/null 2>&1 || skip "needs a kernel in /boot (linux-image-amd64)"
	RUN_VM=$BATS_TEST_DIRNAME/run-vm
}

@test "run-vm: the guest's cgroup2 root offers memory, pids and cpu, with no v1 hierarchy" {
	# the guest's output is run-vm's stdout; run-vm's own notes (a boot
	# tried again, ...) go to its stderr and are no part of it
	run --separate-stderr "$RUN_VM" -- sh -c 'cat /sys/fs/cgroup/cgroup.controllers
		echo "subtree=[$(cat /sys/fs/cgroup/cgroup.subtree_control)]"
		echo "v1=$(grep -c "^[^ ]* [^ ]* cgroup " /proc/mounts)"
		echo "v2=$(grep -c "^[^ ]* /sys/fs/cgroup cgroup2 " /proc/mounts)"'
	echo "$output"
	[ "$status" -eq 0 ]
	for c in memory pids cpu; do
		[[ " ${lines[0]} " == *" $c "* ]]
	done
	[ "${lines[1]}" = "subtree=[]" ]
	[ "${lines[2]}" = "v1=0" ]
	[ "${lines[3]}" = "v2=1" ]
}

@test "run-vm: a KVM probe whose qemu aborts leaves nothing on stderr; the guest runs under TCG" {
	[ -r /dev/kvm ] && [ -w /dev/kvm ] || skip "no usable /dev/kvm: run-vm does not probe here"
	# A qemu that aborts (SIGABRT) when asked for KVM, as on some hosts of
	# this kind; bash reports such an end as "Aborted" on its stderr.
	mkdir -p "$BATS_TEST_TMPDIR/bin"
	real=$(command -v qemu-system-x86_64)
	printf '#!/bin/sh\ncase " $* " in *" -accel kvm "*) kill -ABRT $$ ;; esac\nexec %s "$@"\n' "$real" \
		>"$BATS_TEST_TMPDIR/bin/qemu-system-x86_64"
	chmod +x "$BATS_TEST_TMPDIR/bin/qemu-system-x86_64"
	# a cache of its own, so that the probe runs (the host's has its answer)
	PATH="$BATS_TEST_TMPDIR/bin:$PATH" LCRUN_VM_CACHE="$BATS_TEST_TMPDIR/cache" \
		run --separate-stderr "$RUN_VM" -- sh -c 'echo guest-line; grep -cw memory /sys/fs/cgroup/cgroup.controllers'
	echo "stdout: $output"
	echo "stderr: $stderr"
	[ "$status" -eq 0 ]
	[ "$output" = "guest-line
1" ]
	[ -z "$stderr" ]
	[ "$(cat "$BATS_TEST_TMPDIR"/cache/kvm-*)" = tcg ]
}

@test "run-vm: exits with the command's status" {
	run "$RUN_VM" -- sh -c 'exit 7'
	[ "$status" -eq 7 ]
	run -127 "$RUN_VM" -- lcrun-vm-no-such-command
	[[ "$output" == *lcrun-vm-no-such-command* ]]
}

@test "run-vm: the guest sees the host's tree, and its writes stay in the guest" {
	cd "$BATS_TEST_DIRNAME"
	name=written-in-guest.$$
	run --separate-stderr "$RUN_VM" -- sh -c "pwd; sha256sum run-vm; echo guest >$name; cat $name; touch /usr/$name && echo usr-writable"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "$BATS_TEST_DIRNAME" ]
	[ "${lines[1]}" = "$(sha256sum run-vm)" ]
	[ "${lines[2]}" = guest ]
	[ "${lines[3]}" = usr-writable ]
	[ ! -e "$BATS_TEST_DIRNAME/$name" ]
	[ ! -e "/usr/$name" ]
}

@test "run-vm: the working directory and --share DIR under the guest's fresh /tmp are the host's" {
	mkdir -p "$BATS_TEST_TMPDIR/cwd" "$BATS_TEST_TMPDIR/other dir"
	echo "from the host $$" >"$BATS_TEST_TMPDIR/cwd/f"
	echo "shared $$" >"$BATS_TEST_TMPDIR/other dir/f"
	echo "not shared" >"$BATS_TEST_TMPDIR/f"
	cd "$BATS_TEST_TMPDIR/cwd"
	run --separate-stderr "$RUN_VM" --share "$BATS_TEST_TMPDIR/other dir" -- sh -c 'pwd; cat f "$1/other dir/f"; echo x >g; ls "$1"' sh "$BATS_TEST_TMPDIR"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "$BATS_TEST_TMPDIR/cwd" ]
	[ "${lines[1]}" = "from the host $$" ]
	[ "${lines[2]}" = "shared $$" ]
	[ "${lines[3]}" = "cwd" ]
	[ "${lines[4]}" = "other dir" ]
	[ "${#lines[@]}" -eq 5 ]
	[ ! -e "$BATS_TEST_TMPDIR/cwd/g" ]
}

@test "run-vm: stdout and stderr come back intact, with no kernel messages" {
	run --separate-stderr "$RUN_VM" -- sh -c 'seq 1 1000; echo to-stderr >&2'
	[ "$status" -eq 0 ]
	[ "${#lines[@]}" -eq 1001 ]
	[ "$output" = "$(seq 1 1000; echo to-stderr)" ]
	# bytes, not only lines
	"$RUN_VM" -- cat /bin/busybox >"$BATS_TEST_TMPDIR/busybox.out"
	cmp "$BATS_TEST_TMPDIR/busybox.out" /bin/busybox
}

@test "run-vm: passes LCRUN*, BATS* and TERM, and the arguments as they are" {
	export LCRUN_HARNESS_VALUE="a b 'c' \$d"
	export BATS_HARNESS_VALUE=$'two\nlines'
	export OTHER_HARNESS_VALUE=hidden
	run --separate-stderr "$RUN_VM" -- sh -c 'printf "%s|" "$LCRUN_HARNESS_VALUE" "$BATS_HARNESS_VALUE" "${OTHER_HARNESS_VALUE-unset}" "$@" "$HOME"; id -u' \
		sh '*' 'x y' ''
	[ "$status" -eq 0 ]
	[ "$output" = "a b 'c' \$d|two
lines|unset|*|x y||/root|0" ]
}

@test "run-vm: a command that hangs is stopped at --timeout with 124" {
	start=$SECONDS
	run "$RUN_VM" --timeout 6 -- sleep 600
	[ "$status" -eq 124 ]
	[ "$((SECONDS - start))" -lt 30 ]
	[[ "$output" == *"did not finish within 6s"* ]]
}

@test "run-vm: a boot that hangs is stopped by the boot watchdog, tried again, then 125" {
	# under TCG the kernel alone needs more than a second
	start=$SECONDS
	LCRUN_VM_ACCEL=tcg LCRUN_VM_BOOT_TIMEOUT=1 run "$RUN_VM" --timeout 60 -- true
	[ "$status" -eq 125 ]
	[[ "$output" == *"did not boot within 1s; trying once more"* ]]
	[ "$((SECONDS - start))" -lt 30 ]
}

@test "run-vm: a kernel that does not boot gives 125" {
	kernel=$(ls /boot/vmlinuz-* | head -1)
	fake=$BATS_TEST_TMPDIR/${kernel##*/}
	echo "not a kernel" >"$fake"
	LCRUN_VM_KERNEL=$fake run "$RUN_VM" --timeout 60 -- true
	[ "$status" -eq 125 ]
	[[ "$output" == *"run-vm: the VM failed"* ]]
}

@test "run-vm: --disk FILE is the guest's /dev/vda: what the guest synced is in FILE after a reset from inside (123), what it did not is not" {
	truncate -s 64M "$BATS_TEST_TMPDIR/disk.img"
	run --separate-stderr "$RUN_VM" --disk "$BATS_TEST_TMPDIR/disk.img" -- sh -c '
		printf synced-in-guest | dd of=/dev/vda bs=512 conv=sync,fsync status=none
		exec 3</dev/vda  # (the last close of a block device writes it out)
		printf not-synced | dd of=/dev/vda bs=512 seek=8 conv=sync status=none
		echo cut; echo b >/proc/sysrq-trigger; sleep 10; echo not-reached'
	echo "$output"
	echo "$stderr"
	[ "$status" -eq 123 ]
	[ "$output" = cut ]
	[[ "$stderr" == *"the guest stopped before the command ended"* ]]
	[ "$(head -c 15 "$BATS_TEST_TMPDIR/disk.img")" = synced-in-guest ]
	[ "$(dd if="$BATS_TEST_TMPDIR/disk.img" bs=512 skip=8 count=1 status=none | tr -d '\0')" = "" ]
	# the next boot on the same file reads it back
	run --separate-stderr "$RUN_VM" --disk "$BATS_TEST_TMPDIR/disk.img" -- head -c 15 /dev/vda
	[ "$status" -eq 0 ]
	[ "$output" = synced-in-guest ]
	run "$RUN_VM" --disk "$BATS_TEST_TMPDIR/no-such.img" -- true
	[ "$status" -eq 125 ]
	[[ "$output" == *"--disk wants a raw image file"* ]]
}

@test "run-vm: usage errors give 125" {
	run "$RUN_VM" --cpus zero -- true
	[ "$status" -eq 125 ]
	run "$RUN_VM"
	[ "$status" -eq 125 ]
}

@test "run-vm: the guest has what the runtime needs (userns, overlay on /var/lib/lcrun, netns, veth, nftables)" {
	run --separate-stderr "$RUN_VM" -- sh -c '
		set -e
		setpriv --reuid=65534 --regid=65534 --clear-groups unshare -Ur id -u
		d=/var/lib/lcrun/harness
		mkdir -p $d/upper $d/work $d/merged
		mount -t overlay -o lowerdir=/usr,upperdir=$d/upper,workdir=$d/work harness $d/merged
		touch $d/merged/new && ls $d/upper
		umount $d/merged
		modprobe veth
		ip netns add harness
		ip link add harness0 type veth peer name harness1 netns harness
		ip link show harness0 >/dev/null && echo veth
		ip netns del harness
		nft add table inet harness
		nft list tables
		nft delete table inet harness'
	echo "$output"
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = 0 ]
	[ "${lines[1]}" = new ]
	[ "${lines[2]}" = veth ]
	[ "${lines[3]}" = "table inet harness" ]
}

@test "check-vm: runs bats in the VM, streams the TAP and sums it up" {
	# any executable will do as the lcrun that the sample does not run
	LCRUN=/bin/true run "$BATS_TEST_DIRNAME/check-vm" "$BATS_TEST_DIRNAME/fixtures/check-vm-sample"
	echo "$output"
	[ "$status" -eq 1 ]
	[ "${lines[0]}" = "1..3" ]
	[[ "$output" == *"ok 1 sample: runs in the VM with LCRUN set"* ]]
	[[ "$output" == *"ok 2 sample: skips # skip a sample skip"* ]]
	[[ "$output" == *"not ok 3 sample: fails"* ]]
	[ "${lines[-1]}" = "vm: 1 passed, 1 failed, 1 skipped" ]
}

@test "check-vm: by default it runs only the files marked '# check-vm: yes' (cgroup.bats first)" {
	top=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)
	run "$BATS_TEST_DIRNAME/check-vm" --list
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "$top/tests/integration/cgroup.bats" ]
	for f in "${lines[@]}"; do grep -qx '# check-vm: yes' "$f"; done
	for f in "$top"/tests/integration/*.bats; do
		grep -qx '# check-vm: yes' "$f" || [[ " ${lines[*]} " != *" $f "* ]]
	done
	[[ " ${lines[*]} " != *"/run.bats "* ]]
}
