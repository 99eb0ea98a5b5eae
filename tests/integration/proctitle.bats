#!/usr/bin/env bats
# What a sandbox can read of the processes lcrun puts in it: pid 1 and
# exec's helper show a fixed command line ("lcrun-init", "lcrun-exec"),
# never the host's (the binary's path, flags, -e values, bind sources,
# --env-file paths); their environment stays unreadable.

load helpers

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root"
	host_snapshot
	# distinctive values: none of them may show up inside
	D="$BATS_TEST_TMPDIR/hostpath-$$-$RANDOM"
	mkdir -p "$D/bindsrc"
	SECRET="hunter2-$$-$RANDOM"
	ENVSECRET="envfile-value-$$-$RANDOM"
	echo "FROMFILE=$ENVSECRET" >"$D/envfile"
}

teardown() {
	[ -n "${SB:-}" ] && "$LCRUN" rm -f "$SB" >/dev/null 2>&1
	[ -n "${RL:-}" ] && rm -rf "$RL"
	assert_host_clean
}

# Inside: every process's cmdline and comm but the reader's own (and its
# children's, which are plain tr/cat), then pid 1's environment.
READ_PROCS='for d in /proc/[0-9]*; do
	p=${d#/proc/}
	[ "$p" = "$$" ] && continue
	[ "$(cat $d/comm 2>/dev/null)" = tr ] && continue
	printf "%s cmdline=[%s] comm=[%s]\n" "$p" "$(tr "\0" "|" <$d/cmdline 2>/dev/null)" "$(cat $d/comm 2>/dev/null)"
done
cat /proc/1/environ >/dev/null 2>&1 && echo "pid 1 environ readable"
true'

# Nothing of the host's command line in $output.
assert_nothing_leaked() {
	echo "$output"
	[[ "$output" != *"$SECRET"* ]]
	[[ "$output" != *"$ENVSECRET"* ]]
	[[ "$output" != *"$D"* ]]
	[[ "$output" != *hostpath* ]]
	[[ "$output" != *"$LCRUN"* ]]
	[[ "$output" != *--bind* ]]
	[[ "$output" != *--env-file* ]]
	[[ "$output" != *SECRETX* ]]
	[[ "$output" != *"environ readable"* ]]
}

@test "run: pid 1 shows lcrun-init to root and to a non-root user, nothing of lcrun's command line" {
	for user in 0:0 1000:1000; do
		run "$LCRUN" run -e "SECRETX=$SECRET" --env-file "$D/envfile" --bind "$D/bindsrc:/data:ro" \
			--hostname "h$$" -u "$user" -- sh -c "$READ_PROCS"
		[ "$status" -eq 0 ]
		assert_nothing_leaked
		[ "${lines[0]}" = "1 cmdline=[lcrun-init|] comm=[lcrun-init]" ]
		[ "${#lines[@]}" -eq 1 ]
	done
	# byte for byte: the title and its NUL, nothing after
	run "$LCRUN" run -e "SECRETX=$SECRET" -u 1000 -- od -An -c /proc/1/cmdline
	[ "$(echo $output)" = 'l c r u n - i n i t \0' ]
}

@test "exec: the helper shows lcrun-exec and pid 1 lcrun-init; neither run's nor exec's values leak" {
	SB=$("$LCRUN" create -e "SECRETX=$SECRET" --env-file "$D/envfile" --bind "$D/bindsrc:/data")
	for user in 0 1000; do
		run "$LCRUN" exec -e "EXECSECRET=$SECRET" -w /tmp -u "$user" "$SB" -- sh -c "$READ_PROCS
			for d in /proc/[0-9]*; do [ \"\$(cat \$d/comm)\" = lcrun-exec ] && ! cat \$d/environ >/dev/null 2>&1 && echo helper-environ-closed; done; true"
		[ "$status" -eq 0 ]
		[[ "$output" != *EXECSECRET* ]]
		assert_nothing_leaked
		[ "${lines[0]}" = "1 cmdline=[lcrun-init|] comm=[lcrun-init]" ]
		[[ "${lines[1]}" =~ ^[0-9]+\ cmdline=\[lcrun-exec\|\]\ comm=\[lcrun-exec\]$ ]]
		[ "${lines[2]}" = helper-environ-closed ]
	done
	# a detached exec (its helper is gone once the command started)
	"$LCRUN" exec -d -e "EXECSECRET=$SECRET" "$SB" -- sleep 30
	run "$LCRUN" exec "$SB" -- sh -c "$READ_PROCS"
	assert_nothing_leaked
	grep -q 'cmdline=\[sleep|30|\]' <<<"$output"
	# and lcrun exec itself still shows its own command line on the host
	"$LCRUN" exec -e "EXECSECRET=$SECRET" "$SB" -- sleep 2 &
	pid=$!
	sleep 0.5
	tr '\0' ' ' </proc/$pid/cmdline | grep -q "exec -e EXECSECRET=$SECRET"
	wait "$pid"
}

@test "rootless run: pid 1 shows lcrun-init too" {
	rootless_copy
	mkdir "$RL/bindsrc"
	echo "FROMFILE=$ENVSECRET" >"$RL/envfile"
	chmod -R a+rX "$RL"
	D=$RL
	run rootless_lcrun run \
		-e "SECRETX=$SECRET" --env-file "$RL/envfile" --bind "$RL/bindsrc:/data:ro" -- sh -c "$READ_PROCS"
	[ "$status" -eq 0 ]
	assert_nothing_leaked
	[ "${lines[0]}" = "1 cmdline=[lcrun-init|] comm=[lcrun-init]" ]
}
