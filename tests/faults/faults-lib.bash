# Shared by tests/faults/*.bats: a private store and state directory per
# test, a kill at a named step (LCRUN_FAULT, test builds only), and the
# invariants that must hold after it.
#
#   load faults-lib
#   setup() { faults_setup; }   teardown() { faults_teardown; }
#   fault_at STEP CMD…          CMD run with LCRUN_FAULT=STEP; fails unless
#                               a process of it was killed at STEP
#   faults_check                after the kill: lcrun gc, then every
#                               invariant below, on what this test made
#
# What is "this test's": every sandbox id that had a state directory, a
# sandbox directory, a trash entry or a cgroup marked with this test's
# state directory (liblcrun marks each cgroup it makes, user.lcrun.state)
# at the moment of the check.  Other suites run on the same host at the
# same time: a global before/after picture would count their sandboxes.

load ../integration/helpers

faults_setup() {
	[ "$(id -u)" = 0 ] || skip "needs root"
	"$LCRUN" --version | grep -q fault-injection ||
		skip "lcrun was built without --enable-fault-injection (the LCRUN_FAULT hooks)"
	BIN=$(dirname "$LCRUN")
	F=$(mktemp -d /tmp/lcrun-faults.XXXXXX)
	export LCRUN_ROOT="$F/root" LCRUN_STATE_DIR="$F/state"
	LCRUN_LIB=$LCRUN_ROOT LCRUN_RUN=$LCRUN_STATE_DIR
	unset LCRUN_FAULT LCRUN_FAULT_LOG
	SEEN_IDS=
}

faults_teardown() {
	[ -n "${F:-}" ] || return 0
	unset LCRUN_FAULT
	# thaw, then remove, whatever is left (a failed test's sandboxes)
	local id cg
	for id in $(ls "$LCRUN_STATE_DIR" 2>/dev/null); do
		[ ${#id} = 12 ] || continue
		cg=$(jq -r '.cgroup // empty' "$LCRUN_STATE_DIR/$id/state.json" 2>/dev/null)
		[ -n "$cg" ] && [ -e "$cg/cgroup.freeze" ] && echo 0 >"$cg/cgroup.freeze" 2>/dev/null
		timeout 30 "$LCRUN" rm -f "$id" >/dev/null 2>&1 || true
	done
	timeout 30 "$LCRUN" gc --wait >/dev/null 2>&1 || true
	for m in $(awk -v f="$F" 'index($5, f) == 1 { print $5 }' /proc/self/mountinfo | sort -r); do
		umount -l "$m" 2>/dev/null || true
	done
	rm -rf "$F"
}

# CMD's own exit status and output go to $FAULT_STATUS, $F/fault.out and
# $F/fault.err.  The kill must have happened (the hook logs "STEP killed"
# before it): a test whose step was never reached would check nothing.
fault_at() { # STEP[:N] CMD…
	local step=$1
	shift
	FAULT_STATUS=0
	rm -f "$F/fault.log"
	LCRUN_FAULT=$step LCRUN_FAULT_LOG="$F/fault.log" "$@" >"$F/fault.out" 2>"$F/fault.err" </dev/null ||
		FAULT_STATUS=$?
	# (a helper in a sandbox's mount namespace cannot reach the log: its
	# stderr is the command's, and says it)
	if ! grep -qx "${step%%:*} killed" "$F/fault.log" 2>/dev/null &&
		! grep -qx "lcrun: fault injected at ${step%%:*}" "$F/fault.err"; then
		echo "no process was killed at step $step (exit $FAULT_STATUS); steps passed:" >&2
		sort -u "$F/fault.log" >&2 2>/dev/null
		cat "$F/fault.err" >&2
		return 1
	fi
}

# The ids this test has made so far (see above), added to $SEEN_IDS.
remember_ids() {
	local cgroot id d
	cgroot=$(cgroup2_root)
	local real
	real=$(realpath "$LCRUN_STATE_DIR")
	for d in "$LCRUN_STATE_DIR"/* "$LCRUN_STATE_DIR"/trash-state/* "$LCRUN_ROOT"/sandboxes/* \
		"$LCRUN_ROOT"/trash/*; do
		id=$(basename "$d")
		[[ $id =~ ^[0-9a-f]{12}$ ]] && SEEN_IDS="$SEEN_IDS $id"
	done
	if [ -n "$cgroot" ] && [ -d "$cgroot/lcrun" ]; then
		SEEN_IDS="$SEEN_IDS $(/usr/bin/python3 - "$cgroot/lcrun" "$real" <<'PY'
import os, re, sys
top, mine = sys.argv[1], sys.argv[2].encode()
for n in os.listdir(top):
    if re.fullmatch(r"[0-9a-f]{12}", n):
        try:
            if os.getxattr(os.path.join(top, n), "user.lcrun.state") == mine:
                print(n)
        except OSError:
            pass
PY
)"
	fi
	SEEN_IDS=$(echo "$SEEN_IDS" | tr ' ' '\n' | sort -u | tr '\n' ' ')
}

# What a live sandbox of this test may still hold: the ids whose state
# says they run and whose pid 1 lives (lcrun ps computes it).
live_ids() {
	"$LCRUN" ps --json 2>/dev/null | jq -r '.[] | select(.state == "running" or .state == "paused") | .id'
}

# The invariants after a crash, once `lcrun gc` has run:
#  - no state says running (or paused, creating) for a sandbox whose pid 1
#    is gone: `lcrun ps` says dead or stopped, and gc removes the dead;
#  - no cgroup, veth, nft chain, address lease, state or sandbox directory
#    of a sandbox of this test that is not live; no mount under $F;
#  - the store's tmp/ and layers/.tmp-* are empty; no index.json.tmp.*;
#  - every listed image's blobs verify by digest;
#  - no frozen cgroup of a sandbox that is not paused.
faults_check() {
	remember_ids
	# --wait: for this state directory's removers and network helpers
	# (other suites' are no business of this test's)
	run "$LCRUN" gc --wait
	echo "gc: $output"
	[ "$status" -eq 0 ]
	local live kept id cgroot bad=
	live=" $(live_ids | tr '\n' ' ') "
	# stopped or exited: kept on purpose (a created sandbox whose monitor
	# was killed after its id was told; a run --keep), its files with it
	kept=" $("$LCRUN" ps --json | jq -r '.[] | select(.state == "stopped" or .state == "exited") | .id' | tr '\n' ' ') "
	cgroot=$(cgroup2_root)
	# ps: nothing "running" but live sandboxes, nothing "dead" left
	if "$LCRUN" ps --json | jq -e '.[] | select(.state == "dead" or .state == "creating" or .state == "stopping")' >/dev/null; then
		echo "lcrun ps after gc lists a sandbox that is dead, creating or stopping:" >&2
		"$LCRUN" ps >&2
		bad=1
	fi
	for id in $SEEN_IDS; do
		case $live in *" $id "*)
			# live: it must not be left frozen by a killed snapshot
			local st
			st=$("$LCRUN" inspect "$id" | jq -r .status)
			cg=$("$LCRUN" inspect "$id" | jq -r '.cgroup // empty')
			if [ "$st" != paused ] && [ -n "$cg" ] && [ "$(cat "$cg/cgroup.freeze" 2>/dev/null)" = 1 ]; then
				echo "sandbox $id is $st but its cgroup is frozen" >&2
				bad=1
			fi
			continue ;;
		esac
		if [ -n "$cgroot" ] && [ -d "$cgroot/lcrun/$id" ]; then echo "cgroup of $id left" >&2; bad=1; fi
		if ip link show "lc$id" >/dev/null 2>&1; then echo "veth lc$id left" >&2; bad=1; fi
		if nft list table inet lcrun 2>/dev/null | grep -qE "chain (out|in|host)_$id "; then
			echo "nft chains of $id left" >&2; bad=1
		fi
		if [ -e "$LCRUN_STATE_DIR/net/$id.json" ]; then echo "address lease of $id left" >&2; bad=1; fi
		case $kept in *" $id "*) continue ;; esac
		if [ -e "$LCRUN_STATE_DIR/$id" ]; then echo "state of $id left" >&2; bad=1; fi
		if [ -e "$LCRUN_ROOT/sandboxes/$id" ]; then echo "sandbox directory of $id left" >&2; bad=1; fi
	done
	# (a devbox's disk, lcd/disks/NAME, stays mounted while its box's
	# sandbox lives: boxes outlive lcd by design)
	local disks=-
	[ "$live" = "  " ] || disks="$LCRUN_ROOT/lcd/disks/"
	# (and $FAULTS_OWN_MOUNT: a filesystem the test itself mounted there)
	if awk -v f="$F" -v d="$disks" -v own="${FAULTS_OWN_MOUNT:--}" \
		'index($5, f) == 1 && index($5, d) != 1 && $5 != own { found = 1 } END { exit !found }' /proc/self/mountinfo; then
		echo "mounts left under $F:" >&2
		awk -v f="$F" 'index($5, f) == 1 { print $5 }' /proc/self/mountinfo >&2
		bad=1
	fi
	if [ -n "$(ls -A "$LCRUN_ROOT/tmp" 2>/dev/null)" ]; then
		echo "the store's tmp/ is not empty after gc:" >&2
		ls -la "$LCRUN_ROOT/tmp" >&2
		bad=1
	fi
	if ls -d "$LCRUN_ROOT"/layers/.tmp-* >/dev/null 2>&1; then
		echo "half-unpacked layers left:" >&2
		ls -d "$LCRUN_ROOT"/layers/.tmp-* >&2
		bad=1
	fi
	if ls "$LCRUN_ROOT"/images/index.json.tmp.* >/dev/null 2>&1; then
		echo "a half-written index left:" >&2
		ls "$LCRUN_ROOT"/images/ >&2
		bad=1
	fi
	images_verify || bad=1
	[ -z "$bad" ]
}

# Every image `lcrun image ls` lists: its manifest, config and layer blobs
# exist and hash to their names.
images_verify() {
	local blobs="$LCRUN_ROOT/images/blobs/sha256" d ok=0
	[ -d "$blobs" ] || return 0
	for d in $(jq -r '.manifests[].digest' "$LCRUN_ROOT/images/index.json" 2>/dev/null); do
		blob_ok "${d#sha256:}" || ok=1
		local m="$blobs/${d#sha256:}"
		[ -f "$m" ] || continue
		for x in $(jq -r '.config.digest, .layers[].digest' "$m"); do
			blob_ok "${x#sha256:}" || ok=1
		done
	done
	if "$LCRUN" image ls --json | jq -e '.[] | select(.error)' >/dev/null; then
		echo "lcrun image ls lists a broken image:" >&2
		"$LCRUN" image ls --json >&2
		ok=1
	fi
	return $ok
}

blob_ok() { # HEX
	local f="$LCRUN_ROOT/images/blobs/sha256/$1"
	if [ ! -f "$f" ]; then
		echo "blob sha256:$1 is listed but missing" >&2
		return 1
	fi
	if [ "$(sha256sum <"$f" | cut -d' ' -f1)" != "$1" ]; then
		echo "blob sha256:$1 does not hash to its name" >&2
		return 1
	fi
}

# A value that must never reach a file outside lcd.db.
secret_nowhere() { # VALUE DIR…
	local v=$1 hits
	shift
	hits=$(grep -rlsF --exclude='lcd.db' --exclude='lcd.db-wal' --exclude='lcd.db-shm' -- "$v" "$@" || true)
	if [ -n "$hits" ]; then
		echo "the secret is on disk in: $hits" >&2
		return 1
	fi
}
