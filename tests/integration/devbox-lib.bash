# devbox-lib.bash — a private lcd for devbox tests (lcd-lib.bash), a home
# of the test's own with an SSH key, and the helpers to reach boxes.
#
#   dbx_setup / dbx_teardown   per test; the runtime's files live under
#       /var/lib/lcrun/tests (a disk that can be idmapped, in the VM too)
#   SSHO                       ssh options: the test's key, no user config
#   dbx_ssh NAME CMD…          lcctl devbox NAME ssh … -- CMD
#   dbx_state NAME / dbx_wait_state NAME STATE [SECS]
#   need_host_sshd             skip unless the host has sshd (the host image's)
#   agent_box_image            build images/agent-cli.json and agent-box.json
#       into the default image store (cached after the first time) and
#       give the test's store those images, or skip saying why it cannot

load lcd-lib

dbx_setup() {
	lcd_setup
	[ -z "${LCRUN_IN_VM:-}" ] || skip "devboxes need no cgroup v2 controller; the host suite runs them"
	command -v ssh >/dev/null && command -v mkfs.ext4 >/dev/null || skip "needs ssh and mkfs.ext4"
	LCRUN="${LCRUN:-$BIN/lcrun}"
	mkdir -p /var/lib/lcrun/tests
	R=$(mktemp -d /var/lib/lcrun/tests/devbox-bats.XXXXXX)
	export LCRUN_ROOT="$R/root"
	mkdir -p -m 0700 "$LCRUN_ROOT"
	export HOME="$T/home"
	mkdir -p "$HOME/.ssh"
	chmod 700 "$HOME/.ssh"
	KEY="$HOME/.ssh/id_ed25519"
	ssh-keygen -q -t ed25519 -N '' -C "devbox-test" -f "$KEY"
	SSHO=(-F /dev/null -i "$KEY" -o BatchMode=yes -o ConnectTimeout=60)
	host_snapshot
	start_lcd
}

dbx_teardown() {
	local rc=0
	stop_lcd
	[ -z "${NS:-}" ] || ip netns del "$NS" 2>/dev/null || true
	if [ -n "${R:-}" ]; then
		# the boxes outlive lcd by design: remove them, then their disks
		lcd_leftovers_remove || rc=1
		"$LCRUN" gc >/dev/null 2>&1 || true
		awk -v r="$R/" 'index($5, r) == 1 { print $5 }' /proc/self/mountinfo | sort -r | while read -r m; do
			umount "$m" 2>/dev/null || umount -l "$m"
		done
		rm -f "$LCRUN_ROOT/images" "$LCRUN_ROOT/layers"
		rm -rf "$R"
	fi
	rmdir /var/lib/lcrun/tests 2>/dev/null || true
	[ -z "${T:-}" ] || rm -rf "$T"
	[ ! -f "$BATS_TEST_TMPDIR/host.before" ] || assert_host_clean || rc=1
	return $rc
}

need_host_sshd() {
	[ -x /usr/sbin/sshd ] || skip "the host image needs the host's sshd (openssh-server: contrib/install-deps)"
}

dbx_ssh() { # NAME CMD…
	local name=$1
	shift
	"$LCCTL" devbox "$name" ssh "${SSHO[@]}" -- "$@"
}

dbx_state() { "$LCCTL" devbox show "$1" | jq -r .state; }

dbx_wait_state() { # NAME STATE [SECONDS]
	for _ in $(seq $(( ${3:-20} * 10 ))); do
		[ "$(dbx_state "$1")" = "$2" ] && return 0
		sleep 0.1
	done
	echo "devbox $1 is $(dbx_state "$1"), not $2" >&2
	return 1
}

agent_box_image() {
	local out skipfile=${BATS_FILE_TMPDIR:-$BATS_TEST_TMPDIR}/agent-box.skip
	[ -f "$skipfile" ] && skip "$(cat "$skipfile")"
	local img="$BATS_TEST_DIRNAME/../../images"
	out=$( (env -u LCRUN_ROOT -u LCRUN_STATE_DIR timeout -k 2 1800 "$LCRUN" image build "$img/agent-cli.json" &&
		env -u LCRUN_ROOT -u LCRUN_STATE_DIR timeout -k 2 600 "$LCRUN" image build "$img/agent-box.json") 2>&1) || {
		echo "the agent-box image cannot be built here: $(echo "$out" | tail -1)" >"$skipfile"
		skip "$(cat "$skipfile")"
	}
	# The test's private store reads the images of the default one.  lcd,
	# started already, lists its images at start and so made the store's
	# directories (empty: nothing is built in it): links replace them.
	local d
	for d in images layers; do
		[ -L "$LCRUN_ROOT/$d" ] || rm -rf "${LCRUN_ROOT:?}/$d"
		ln -sfn "/var/lib/lcrun/$d" "$LCRUN_ROOT/$d"
	done
}
