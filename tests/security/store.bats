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
