#!/usr/bin/env bats
# What a local user who is not root can reach of lcrun's store and state
# directory (LCRUN_ROOT, LCRUN_STATE_DIR), and what an empty store does to
# the image verbs.  Runs as root; the probes run as nobody.

load ../integration/helpers

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root"
	# Under a directory every user may enter, as /var/lib is: the only
	# thing between nobody and the store is the store's own mode.
	S=$(mktemp -d /tmp/lcrun-sec-store.XXXXXX)
	chmod 755 "$S"
	export LCRUN_ROOT=$S/root LCRUN_STATE_DIR=$S/state
}

teardown() {
	for id in $("$LCRUN" ps --json 2>/dev/null | jq -r '.[].id'); do "$LCRUN" rm -f "$id" >/dev/null 2>&1 || true; done
	"$LCRUN" gc --wait >/dev/null 2>&1 || true
	rm -rf "$S"
}

# A snapshot whose layer holds /srv/id, a copy of id(1) that is setuid
# root inside the sandbox: what an image keeps of a sandbox's setuid file.
snapshot_with_setuid_root() {
	local id
	id=$("$LCRUN" create)
	"$LCRUN" exec "$id" -- sh -c 'mkdir -p /srv && cp /usr/bin/id /srv/id && chmod 4755 /srv/id'
	"$LCRUN" snapshot "$id" suid >/dev/null
	"$LCRUN" rm -f "$id" >/dev/null
}

@test "a setuid-root file kept by a snapshot cannot be run by a local user from the layer store" {
	# LCRUN_ROOT made with mkdir: 0755, as most people make a directory
	mkdir "$LCRUN_ROOT"
	[ "$(stat -c %a "$LCRUN_ROOT")" = 755 ]
	run "$LCRUN" create
	[ "$status" -eq 118 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == "lcrun: LCRUN_ROOT $LCRUN_ROOT is open to other users (mode 0755)"*"chmod 700 $LCRUN_ROOT" ]]
	# nothing was made there
	[ -z "$(ls -A "$LCRUN_ROOT")" ]
	[ ! -e "$LCRUN_STATE_DIR" ] || [ -z "$(ls -A "$LCRUN_STATE_DIR" | grep -v '\.lock$')" ]
	# as the message says
	chmod 700 "$LCRUN_ROOT"
	snapshot_with_setuid_root
	"$LCRUN" run --image suid -- true
	# the unpacked layer does hold a setuid-root file (the store is
	# what protects the host, as for runc's and Podman's)
	f=$(find "$LCRUN_ROOT/layers" -path '*/srv/id')
	[ -n "$f" ]
	[ "$(stat -c '%A %U' "$f")" = "-rwsr-xr-x root" ]
	# and nobody can reach it, nor anything else of the store
	run runuser -u nobody -- "$f"
	echo "$output"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Permission denied"* ]]
	[[ "$output" != *"euid=0"* ]]
	run runuser -u nobody -- ls "$LCRUN_ROOT"
	[ "$status" -ne 0 ]
	# every directory lcrun made right under the root: private too
	for d in "$LCRUN_ROOT"/*/; do
		[ "$(stat -c %a "$d")" != 755 ] || { echo "$d is 0755"; false; }
	done
}

@test "a store lcrun makes itself is private; one of another user's, or a state directory others may write, is refused" {
	# made by lcrun: 0700 whatever command made it first
	"$LCRUN" image ls >/dev/null
	[ "$(stat -c %a "$LCRUN_ROOT")" = 700 ]
	[ "$(stat -c %a "$LCRUN_STATE_DIR")" = 711 ]
	[ "$(stat -c %a "$LCRUN_ROOT/layers")" = 700 ]
	[ "$(stat -c %a "$LCRUN_ROOT/images")" = 700 ]
	# a root that belongs to someone else: its owner could swap what
	# root runs and removes there
	chown nobody "$LCRUN_ROOT"
	run "$LCRUN" run -- true
	[ "$status" -eq 118 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == "lcrun: LCRUN_ROOT $LCRUN_ROOT belongs to uid 65534, not to uid 0"* ]]
	run "$LCRUN" gc
	[ "$status" -eq 118 ]
	chown root "$LCRUN_ROOT"
	# a state directory others may write to is refused; one they may
	# only list is taken as it is
	chmod 777 "$LCRUN_STATE_DIR"
	run "$LCRUN" ps
	[ "$status" -eq 118 ]
	[[ "$output" == "lcrun: LCRUN_STATE_DIR $LCRUN_STATE_DIR is open to other users (mode 0777)"*"chmod 711 $LCRUN_STATE_DIR" ]]
	chmod 755 "$LCRUN_STATE_DIR"
	run "$LCRUN" run -- true
	[ "$status" -eq 0 ]
	[ "$(stat -c %a "$LCRUN_STATE_DIR")" = 755 ]
}

@test "a default store that others can reach is made private again (rootless: \$XDG_DATA_HOME/lcrun)" {
	local user home
	user=$(rootless_user)
	rootless_copy
	home=$S/home
	mkdir -p "$home/data/lcrun" "$home/run"
	chown -R "$user" "$home"
	chmod 755 "$home/data/lcrun"
	chmod 700 "$home/run"
	run as_user "$user" env -u LCRUN_ROOT -u LCRUN_STATE_DIR XDG_DATA_HOME="$home/data" XDG_RUNTIME_DIR="$home/run" \
		LCRUN_POLICY_DIR="$RL/policies" "$RL/lcrun" run -- true
	rm -rf "$RL"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(stat -c %a "$home/data/lcrun")" = 700 ]
	[ "$(stat -c %a "$home/run/lcrun")" = 711 ]
}

@test "image rm and image tag on a store that never held an image answer at once" {
	# index_edit took the index lock, then index_load made the store and
	# took the same lock again: flock locks are per open file, so it
	# waited for itself for ever.  A root that has run a sandbox, no image:
	"$LCRUN" run -- true
	[ ! -e "$LCRUN_ROOT/images" ]
	run timeout 20 "$LCRUN" image rm nothing
	echo "$output"
	[ "$status" -eq 120 ]
	[ "$output" = "lcrun: no image named nothing (see lcrun image ls)" ]
	rm -rf "$LCRUN_ROOT/images"
	run timeout 20 "$LCRUN" image tag nothing other
	echo "$output"
	[ "$status" -eq 120 ]
	[ "$output" = "lcrun: no image named nothing (see lcrun image ls)" ]
	# and with no root at all
	rm -rf "$LCRUN_ROOT"
	run timeout 20 "$LCRUN" image rm nothing
	[ "$status" -eq 120 ]
}
