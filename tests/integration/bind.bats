#!/usr/bin/env bats
# Binds of a checkout, as CI uses them: a root caller's read-write bind is
# idmapped (SRC's owner is the sandbox's user inside, and what the sandbox
# writes belongs to SRC's owner on the host); :idmap insists, :noidmap
# refuses; read-only stays read-only; nothing outside the binds is
# reachable.

load helpers

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root"
	host_snapshot
	W="$BATS_TEST_TMPDIR/w"
	mkdir -p "$W"
}

teardown() {
	[ -n "${SB:-}" ] && "$LCRUN" rm -f "$SB" >/dev/null 2>&1
	[ -n "${RL:-}" ] && rm -rf "$RL"
	assert_host_clean
}

# A small project: a git repository with a Makefile whose test target
# writes a TAP file, owned by UID:GID.
make_checkout() { # DIR UID:GID
	mkdir -p "$1"
	git -C "$1" init -q
	printf 'all:\n\techo built >out.txt\ntest: all\n\tprintf "1..1\\nok 1 built\\n" >report.tap\n' >"$1/Makefile"
	git -C "$1" add Makefile
	git -C "$1" -c user.name=host -c user.email=host@example.com commit -qm init
	chown -R "$2" "$1"
}

# What the sandbox does in the tree: touch, make, git commit.
WORK='set -e
stat -c "inside %u:%g" .
touch new-file
make -s test
git add -A
git -c user.name=sandbox -c user.email=sb@example.com commit -qm "from the sandbox"
git log --format=%s | head -1'

@test "root- and uid-1000-owned checkouts, default and :idmap: touch, make, git commit; the host sees the tree's owner" {
	for owner in 0:0 1000:1000; do
		for opt in "" ":idmap" ":rw,idmap"; do
			co="$W/co-${owner%%:*}-${opt//[:,]/_}"
			make_checkout "$co" "$owner"
			run "$LCRUN" run --bind "$co:/src$opt" -w /src -- sh -c "$WORK"
			echo "owner $owner, option '$opt': $output"
			[ "$status" -eq 0 ]
			[ "${lines[0]}" = "inside 0:0" ]
			[ "${lines[-1]}" = "from the sandbox" ]
			# on the host: every file the sandbox made belongs to the tree's owner
			[ -z "$(find "$co" \( ! -uid "${owner%%:*}" -o ! -gid "${owner##*:}" \) -print)" ]
			[ "$(cat "$co/out.txt")" = built ]
			grep -qx 'ok 1 built' "$co/report.tap"
			[ "$(git -c safe.directory='*' -C "$co" log --format=%s | head -1)" = "from the sandbox" ]
		done
	done
}

@test "--user: the tree's owner is the sandbox's user inside; its files are the owner's on the host" {
	co="$W/co"
	make_checkout "$co" 1000:1000
	run "$LCRUN" run -u 1234:2345 --bind "$co:/src" -w /src -- sh -c "$WORK; id -u; stat -c %u:%g new-file"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = "inside 1234:2345" ]
	[ "${lines[-1]}" = "1234:2345" ]
	[ -z "$(find "$co" \( ! -uid 1000 -o ! -gid 1000 \) -print)" ]
}

@test "create and exec: an idmapped bind, nested binds, nothing left on the host" {
	co="$W/co"
	make_checkout "$co" 1000:1000
	mkdir -p "$W/cache"
	SB=$("$LCRUN" create --bind "$co:/src:idmap" --bind "$W/cache:/src/.cache")
	run "$LCRUN" exec -w /src "$SB" -- sh -c "$WORK; touch .cache/c"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(stat -c %u:%g "$co/new-file")" = 1000:1000 ]
	# the bind beneath the first is the sandbox's only: root's tree, root's file
	[ "$(stat -c %u:%g "$W/cache/c")" = 0:0 ]
	[ ! -e "$co/.cache/c" ]
	"$LCRUN" rm -f "$SB"
	SB=
}

@test "a bind below /tmp shows in the sandbox's /tmp, which is still a fresh tmpfs of the sandbox's root" {
	co="$W/co"
	mkdir -p "$co"
	echo hello >"$co/f"
	chown -R 1000:1000 "$co"
	run "$LCRUN" run --bind "$co:/tmp/co" -- sh -c '
		cat /tmp/co/f; touch /tmp/co/new /tmp/other
		stat -c "%u %a" /tmp; ls /tmp; findmnt -no FSTYPE /tmp'
	echo "$output"
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = hello ]
	[ "${lines[1]}" = "0 1777" ]
	[ "${lines[2]}" = co ]
	[ "${lines[3]}" = other ]
	[ "${lines[4]}" = tmpfs ]
	[ "$(stat -c %u "$co/new")" = 1000 ]
	[ ! -e /tmp/other ]
}

@test "read-only binds stay read-only, idmapped or not, even for root with CAP_SYS_ADMIN" {
	co="$W/co"
	make_checkout "$co" 1000:1000
	for b in "--bind $co:/src:ro" "--bind $co:/src:ro,idmap" "--ro-bind $co:/src" "--bind $co:/src:ro,noidmap"; do
		# shellcheck disable=SC2086
		run "$LCRUN" run $b --cap-add SYS_ADMIN --seccomp unconfined -- sh -c '
			stat -c "owner %u" /src
			touch /src/x 2>/dev/null && echo wrote
			mount -o remount,bind,rw /src 2>/dev/null && echo remounted
			touch /src/x 2>/dev/null && echo wrote
			true'
		echo "$b: $output"
		[ "$status" -eq 0 ]
		[[ "$output" != *wrote* ]]
		[[ "$output" != *remounted* ]]
		[ ! -e "$co/x" ]
		case $b in
		*ro,idmap*) [ "${lines[0]}" = "owner 0" ] ;;   # idmapped: the owner is root inside
		*) [ "${lines[0]}" = "owner 65534" ] ;;         # not: uid 1000 is outside the sandbox's range
		esac
	done
}

@test ":noidmap keeps host ids: the tree is nobody's inside and root cannot write to it" {
	co="$W/co"
	make_checkout "$co" 1000:1000
	run "$LCRUN" run --bind "$co:/src:noidmap" -- sh -c 'stat -c %u /src; touch /src/x'
	[ "$status" -ne 0 ]
	[ "${lines[0]}" = 65534 ]
	[ ! -e "$co/x" ]
}

@test "a filesystem that cannot be idmapped: :idmap fails in one line with 125, the default falls back" {
	mkdir -p "$W"/ovl/{lower,upper,work,merged}
	touch "$W/ovl/lower/f"
	# An overlay as the bind source, in a mount namespace of the test's own.
	run unshare -m sh -c '
		mount -t overlay -o "lowerdir=$1/lower,upperdir=$1/upper,workdir=$1/work" ovl "$1/merged" || exit 99
		"$2" run --bind "$1/merged:/m:idmap" -- ls /m' sh "$W/ovl" "$LCRUN"
	echo "$output"
	[ "$status" -eq 125 ]
	[ "${#lines[@]}" -eq 1 ]
	[ "${lines[0]}" = "lcrun: --bind $W/ovl/merged:/m:idmap: its filesystem (overlay) cannot be idmapped; bind it with :noidmap" ]
	run unshare -m sh -c '
		mount -t overlay -o "lowerdir=$1/lower,upperdir=$1/upper,workdir=$1/work" ovl "$1/merged" || exit 99
		"$2" run --bind "$1/merged:/m" -- sh -c "ls /m; stat -c %u /m/f"' sh "$W/ovl" "$LCRUN"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "${lines[0]}" = f ]
	[ "${lines[1]}" = 65534 ]
}

@test "the sandbox writes nowhere but its binds: no way out through links, .., chown or other owners' files" {
	co="$W/co"
	make_checkout "$co" 1000:1000
	mkdir -p "$W/outside"
	echo original >"$W/outside/secret"
	echo theirs >"$co/theirs"
	chown 4242:4242 "$co/theirs"
	# links the host left in the tree, pointing out of it
	ln -s "$W/outside/secret" "$co/link-out"
	ln -s ../../outside "$co/dir-out"
	run "$LCRUN" run --bind "$co:/src" -w /src -- sh -c '
		echo changed 2>/dev/null >link-out && echo "wrote through link"
		echo changed 2>/dev/null >dir-out/secret && echo "wrote through dir link"
		echo x 2>/dev/null >../escape
		ln theirs /tmp/hard 2>/dev/null && echo "hard link out"
		stat -c "theirs %u" theirs
		echo mine 2>/dev/null >>theirs && echo "wrote theirs"
		chmod 666 theirs 2>/dev/null && echo "chmod theirs"
		touch mine; chown 5:5 mine 2>/dev/null && echo "chown to another id"
		true'
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(cat "$W/outside/secret")" = original ]
	[ ! -e "$W/escape" ]
	[ ! -e "$co/../escape" ]
	[ "$(cat "$co/theirs")" = theirs ]
	[ "$(stat -c %a "$co/theirs")" = 644 ]
	[[ "$output" == *"theirs 65534"* ]]
	[[ "$output" != *"wrote"* ]]
	[[ "$output" != *"chmod theirs"* ]]
	[[ "$output" != *"chown to another id"* ]]
	# nothing in the tree belongs to the sandbox's host range
	[ -z "$(find "$co" -uid +65535 -print)" ]
	[ "$(stat -c %u "$co/mine")" = 1000 ]
}

@test "rootless: :idmap needs root (118); the caller's own tree is writable as before" {
	user=$(rootless_user)
	rootless_copy
	mkdir "$RL/co"
	chown "$user" "$RL/co"
	run rootless_lcrun run --bind "$RL/co:/src:idmap" -- true
	[ "$status" -eq 118 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == *":idmap needs root"* ]]
	run rootless_lcrun run --bind "$RL/co:/src" -- sh -c 'touch /src/f; stat -c %u /src/f'
	[ "$status" -eq 0 ]
	[ "$output" = 0 ]
	[ "$(stat -c %U "$RL/co/f")" = "$user" ]
}

@test "bad --bind options: one line, exit 123" {
	for b in "$W:/x:bogus" "$W:/x:ro,rw" "$W:/x:idmap,noidmap" "$W:relative" "$W:/x:"; do
		run "$LCRUN" run --bind "$b" -- true
		echo "$b: $output"
		[ "$status" -eq 123 ]
		[ "${#lines[@]}" -eq 1 ]
		[[ "${lines[0]}" == "lcrun: --bind '$b': "* ]]
	done
	run "$LCRUN" run --bind "$W/missing:/x:idmap" -- true
	[ "$status" -eq 122 ]
}
