#!/usr/bin/env bats
# lcrun image …: the store as a user drives it (as root).
# The store lives in a temporary LCRUN_ROOT; no sandbox is started here.

setup() {
	LCRUN=${LCRUN:-$BATS_TEST_DIRNAME/../../build/lcrun}
	MKTAR="python3 $BATS_TEST_DIRNAME/../fixtures/mktar.py"
	# On the disk that holds /var/lib/lcrun: in the VM suite that is ext4,
	# while /var/tmp is a tmpfs that its 6.1 kernel cannot idmap.
	mkdir -p /var/lib/lcrun/tests
	T=$(mktemp -d /var/lib/lcrun/tests/image-bats.XXXXXX)
	export LCRUN_ROOT=$T/root LCRUN_STATE_DIR=$T/state
	mkdir -p "$LCRUN_STATE_DIR"
	STORE=$LCRUN_ROOT/images
}

teardown() {
	rm -rf "$T"
	rmdir /var/lib/lcrun/tests 2>/dev/null || true
}

# A listing of a tree: path, type, mode, owner, size, content hash, link target.
listing() {
	(cd "$1" && find . -mindepth 1 -printf '%P|%y|%m|%U:%G|%s|%l\n' | sort | while IFS='|' read -r p y m o s l; do
		h=-
		[ "$y" = f ] && h=$(sha256sum <"$p" | cut -c1-16)
		[ "$y" = d ] && s=-
		echo "$p|$y|$m|$o|$s|$h|$l"
	done)
}

# The unpacked dir of an image's only (or last) layer.
layer_dir() {
	local diff
	diff=$("$LCRUN" image inspect "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["layers"][-1]["diff_id"][7:])')
	echo "$LCRUN_ROOT/layers/$diff"
}

make_tree() {
	mkdir -p "$1/etc" "$1/bin" "$1/home/user"
	echo welcome >"$1/etc/motd"
	printf '#!/bin/sh\necho hi\n' >"$1/bin/hi"
	chmod 755 "$1/bin/hi"
	ln "$1/bin/hi" "$1/bin/hi2"
	ln -s hi "$1/bin/hello"
	echo secret >"$1/home/user/notes"
	chown -R 1000:1000 "$1/home/user"
	chmod 600 "$1/home/user/notes"
	truncate -s 8M "$1/sparse"
	echo tail >>"$1/sparse"
}

@test "import a directory and a tarball; ls, inspect" {
	make_tree "$T/src"
	run "$LCRUN" image import "$T/src" --name fromdir
	[ "$status" -eq 0 ]
	[ "$output" = fromdir ]
	$MKTAR rootfs "$T/rootfs.tar.gz"
	run "$LCRUN" image import "$T/rootfs.tar.gz"
	[ "$status" -eq 0 ]
	[ "$output" = rootfs ]      # named after the file

	run "$LCRUN" image ls
	[ "$status" -eq 0 ]
	[[ "${lines[0]}" == NAME* ]]
	[[ "$output" == *fromdir* && "$output" == *rootfs* ]]
	run "$LCRUN" image ls --json
	[ "$(echo "$output" | python3 -c 'import json,sys; print(" ".join(i["name"] for i in json.load(sys.stdin)))')" = "fromdir rootfs" ]

	run "$LCRUN" image inspect rootfs
	[ "$status" -eq 0 ]
	echo "$output" | python3 -c 'import json,sys; j=json.load(sys.stdin); assert len(j["layers"])==1 and j["layers"][0]["unpacked"], j'

	# the unpacked layers hold what went in, owners and links kept
	[ "$(listing "$(layer_dir fromdir)")" = "$(listing "$T/src")" ]
	d=$(layer_dir rootfs)
	[ "$(cat "$d/etc/motd")" = welcome ]
	[ "$(stat -c %u:%g:%a "$d/home/user/notes")" = 1000:1000:600 ]
	[ "$(readlink "$d/etc/localtime")" = /usr/share/zoneinfo/UTC ]
	[ "$(stat -c %i "$d/bin/hello")" = "$(stat -c %i "$d/bin/hello2")" ]
	# sparse stays sparse
	[ "$(stat -c %b "$(layer_dir fromdir)/sparse")" -lt 1024 ]

	run "$LCRUN" image inspect nosuch
	[ "$status" -eq 120 ]
	[[ "$output" == "lcrun: "*nosuch* ]]
}

@test "import from standard input needs a name" {
	$MKTAR rootfs "$T/r.tar"
	run sh -c "'$LCRUN' image import - <'$T/r.tar'"
	[ "$status" -eq 123 ]
	run sh -c "'$LCRUN' image import - --name piped <'$T/r.tar'"
	[ "$status" -eq 0 ]
	[ "$output" = piped ]
	[ -z "$(ls -A "$LCRUN_ROOT/tmp")" ]
}

@test "tag and rm" {
	make_tree "$T/src"
	"$LCRUN" image import "$T/src" --name a
	run "$LCRUN" image tag a b
	[ "$status" -eq 0 ]
	run "$LCRUN" image tag a b
	[ "$status" -eq 119 ]
	run "$LCRUN" image tag a host
	[ "$status" -eq 123 ]
	run "$LCRUN" image tag missing c
	[ "$status" -eq 120 ]
	da=$("$LCRUN" image ls --json | python3 -c 'import json,sys; print({i["name"]:i["digest"] for i in json.load(sys.stdin)}["a"])')
	db=$("$LCRUN" image ls --json | python3 -c 'import json,sys; print({i["name"]:i["digest"] for i in json.load(sys.stdin)}["b"])')
	[ "$da" = "$db" ]
	run "$LCRUN" image rm a
	[ "$status" -eq 0 ]
	run "$LCRUN" image inspect a
	[ "$status" -eq 120 ]
	run "$LCRUN" image inspect b
	[ "$status" -eq 0 ]
	run "$LCRUN" image rm a
	[ "$status" -eq 120 ]
	run "$LCRUN" image import "$T/src" --name b
	[ "$status" -eq 119 ]
}

@test "export and import round trip" {
	make_tree "$T/src"
	"$LCRUN" image import "$T/src" --name orig
	before=$(listing "$(layer_dir orig)")
	d1=$("$LCRUN" image inspect orig | python3 -c 'import json,sys; print(json.load(sys.stdin)["digest"])')
	"$LCRUN" image export orig >"$T/orig.tar"
	"$LCRUN" image rm orig
	"$LCRUN" image prune
	[ ! -d "$LCRUN_ROOT/layers/${d1#sha256:}" ]
	run "$LCRUN" image import "$T/orig.tar" --name back
	[ "$status" -eq 0 ]
	[ "$output" = back ]
	d2=$("$LCRUN" image inspect back | python3 -c 'import json,sys; print(json.load(sys.stdin)["digest"])')
	[ "$d1" = "$d2" ]
	[ "$(listing "$(layer_dir back)")" = "$before" ]
	# without --name the archive's own name is used
	"$LCRUN" image rm back
	run "$LCRUN" image import "$T/orig.tar"
	[ "$output" = orig ]
	# -o writes the same archive, byte for byte (exports are reproducible)
	"$LCRUN" image export orig -o "$T/again.tar"
	cmp "$T/again.tar" "$T/orig.tar"
	run "$LCRUN" image export nosuch -o "$T/none.tar"
	[ "$status" -eq 120 ]
	[ ! -e "$T/none.tar" ]
	[ -z "$(ls -A "$T" | grep none)" ]
}

# Run a command in a private mount namespace where libarchive.so.13 is an
# empty file (dlopen fails: "file too short").
without_libarchive() {
	local lib
	lib=$(ldconfig -p | awk '$1 == "libarchive.so.13" { print $NF; exit }')
	[ -n "$lib" ] || return 1
	unshare -m sh -c 'mount --bind /dev/null "$(readlink -f "$0")" && exec "$@"' "$lib" "$@"
}

@test "without libarchive.so.13 the archive verbs fail in one line naming it; the rest works" {
	make_tree "$T/src"
	"$LCRUN" image import "$T/src" --name kept
	run without_libarchive "$LCRUN" image import "$T/src" --name gone
	[ "$status" -eq 125 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == "lcrun: cannot import "*": cannot load libarchive.so.13, "*"file too short" ]]
	run without_libarchive "$LCRUN" image export kept -o "$T/kept.tar"
	[ "$status" -eq 125 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == *"cannot load libarchive.so.13"* ]]
	[ ! -e "$T/kept.tar" ]
	# nothing lost, nothing half-imported
	run without_libarchive "$LCRUN" image ls --json
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | python3 -c 'import json,sys; print(" ".join(i["name"] for i in json.load(sys.stdin)))')" = kept ]
	# a sandbox needs no libarchive
	run without_libarchive "$LCRUN" run -- /bin/sh -c 'echo ran'
	[ "$status" -eq 0 ]
	[ "$output" = ran ]
}

@test "skopeo and umoci read the store and our archives; we read theirs" {
	command -v skopeo || skip "skopeo is not installed"
	make_tree "$T/src"
	"$LCRUN" image import "$T/src" --name tool-test
	layer=$("$LCRUN" image inspect tool-test | python3 -c 'import json,sys; print(json.load(sys.stdin)["layers"][0]["digest"])')
	run skopeo inspect "oci:$STORE:tool-test"
	[ "$status" -eq 0 ]
	[[ "$output" == *"$layer"* ]]
	if command -v umoci; then
		run umoci ls --layout "$STORE"
		[ "$status" -eq 0 ]
		[[ "$output" == *tool-test* ]]
	fi
	"$LCRUN" image export tool-test >"$T/x.tar"
	run skopeo inspect "oci-archive:$T/x.tar"
	[ "$status" -eq 0 ]
	[[ "$output" == *"$layer"* ]]
	# skopeo recompresses with gzip: our import reads that too
	skopeo copy --dest-compress --dest-compress-format gzip "oci:$STORE:tool-test" "oci-archive:$T/gz.tar:gz-copy"
	run "$LCRUN" image import "$T/gz.tar"
	[ "$status" -eq 0 ]
	[ "$output" = gz-copy ]
	"$LCRUN" image inspect gz-copy | grep -q 'tar+gzip'
	[ "$(listing "$(layer_dir gz-copy)")" = "$(listing "$(layer_dir tool-test)")" ]
}

@test "prune removes what nothing uses, and only that" {
	make_tree "$T/a"
	mkdir -p "$T/b" && echo only-b >"$T/b/file"
	"$LCRUN" image import "$T/a" --name keep
	"$LCRUN" image import "$T/b" --name drop
	"$LCRUN" image tag keep keep2
	keep_blobs=$(python3 - "$STORE" keep <<'EOF'
import json, sys
store, name = sys.argv[1], sys.argv[2]
idx = json.load(open(store + "/index.json"))
d = [m for m in idx["manifests"] if m["annotations"]["org.opencontainers.image.ref.name"] == name][0]["digest"]
m = json.load(open(store + "/blobs/sha256/" + d[7:]))
print(" ".join(x[7:] for x in [d, m["config"]["digest"]] + [l["digest"] for l in m["layers"]]))
EOF
)
	drop_layer=$(layer_dir drop)
	keep_layer=$(layer_dir keep)
	run "$LCRUN" image prune
	[ "$status" -eq 0 ]
	[[ "$output" == "removed 0 blobs"* ]]
	"$LCRUN" image rm drop keep
	run "$LCRUN" image prune --json
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["blobs"], j["layers"])')" = "3 1" ]
	for b in $keep_blobs; do [ -f "$STORE/blobs/sha256/$b" ]; done
	[ "$(ls "$STORE/blobs/sha256" | wc -l)" -eq 3 ]
	[ ! -e "$drop_layer" ]
	[ -d "$keep_layer" ]
	run skopeo inspect "oci:$STORE:keep2"
	[ "$status" -eq 0 ]
}

@test "malicious tarballs are refused by entry, the host untouched" {
	out=$T/outside
	mkdir -p "$out"
	echo host-data >"$out/secret"
	before=$(listing "$out"; stat -c '%h %Y' "$out/secret")
	check() { # kind, entry the error must name
		$MKTAR "$1" "$T/$1.tar" "$out"
		run "$LCRUN" image import "$T/$1.tar" --name "evil-$1"
		echo "$1: $status $output"
		[ "$status" -eq 121 ]
		[ "${#lines[@]}" -eq 1 ]
		[[ "$output" == "lcrun: "*"$2"* ]]
		[ "$(listing "$out"; stat -c '%h %Y' "$out/secret")" = "$before" ]
		[ ! -e "$T/x" ] && [ ! -e "$LCRUN_ROOT/x" ] && [ ! -e "$LCRUN_ROOT/layers/x" ]
		run "$LCRUN" image inspect "evil-$1"
		[ "$status" -eq 120 ]
	}
	check traversal "'../x'"
	check absolute "'$out/x'"
	check symlink "'link/x'"
	check uplink "'dir/up'"
	check hardlink "'h'"
	check device "'dev/sda'"
	check setuid "'bin/rootshell'"
	# nothing half made: no blobs, no layers, no temp files
	[ -z "$(ls -A "$STORE/blobs/sha256")" ]
	[ -z "$(ls -A "$LCRUN_ROOT/layers")" ]
	[ -z "$(ls -A "$LCRUN_ROOT/tmp")" ]
	# a trusted import may carry setuid and device nodes
	run "$LCRUN" image import "$T/setuid.tar" --name trusted --trusted
	[ "$status" -eq 0 ]
	[ "$(stat -c %a "$(layer_dir trusted)/bin/rootshell")" = 4755 ]
}

# ---- snapshots, forks and builds: these start sandboxes ----------------------

# A busybox image made here from the host's static busybox; skips when the
# runtime cannot run on images yet, or busybox is missing.
busybox_image() {
	[ -x /bin/busybox ] || skip "no /bin/busybox (busybox-static)"
	mkdir -p "$T/bb/bin" "$T/bb/etc" "$T/bb/opt/olddir" "$T/bb/tmp"
	cp /bin/busybox "$T/bb/bin/"
	for a in $(/bin/busybox --list); do [ "$a" = busybox ] || ln -sf busybox "$T/bb/bin/$a"; done
	echo motd >"$T/bb/etc/motd"
	echo bye >"$T/bb/etc/removeme"
	echo old >"$T/bb/opt/olddir/a"
	echo marker >"$T/bb/marker"
	"$LCRUN" image import "$T/bb" --name "$1" >/dev/null
	out=$(timeout -k 2 60 "$LCRUN" run --image "$1" -- cat /marker 2>&1) || true
	[ "$out" = marker ] || skip "lcrun run --image does not run on images here: $out"
}

# What a sandbox sees: path, type, mode, owner, size, content hash, link target.
LIST='cd / && find bin etc opt data 2>/dev/null | sort | while read -r p; do
	t=$(stat -c "%F|%a|%u:%g|%s" "$p"); h=-; l=-
	[ -f "$p" ] && [ ! -L "$p" ] && h=$(sha256sum "$p" | cut -c1-16)
	[ -L "$p" ] && l=$(readlink "$p")
	echo "$p|$t|$h|$l"
done'

@test "snapshot: a sandbox's changes come back identical in a sandbox run from it" {
	busybox_image base
	change='set -e
		mkdir -p /data/sub
		echo created >/data/new
		echo more >>/etc/motd
		chmod 640 /data/new
		chown 1000:1000 /data/new
		ln /data/new /data/hard
		ln -s ../etc/motd /data/sym
		ln -s /etc/motd /data/abs
		rm /etc/removeme
		rm -rf /opt/olddir && mkdir /opt/olddir && echo fresh >/opt/olddir/only
		chmod 2755 /data/sub
		mkfifo /data/fifo
		dd if=/dev/zero of=/data/sparse bs=1 count=0 seek=5M 2>/dev/null
		echo tail >>/data/sparse'
	timeout -k 2 60 "$LCRUN" run --keep --name snapsrc --image base -- sh -c "$change; $LIST" >"$T/before"
	grep -q '^data/new|regular file|640|1000:1000|' "$T/before"
	if grep -q removeme "$T/before"; then false; fi
	run "$LCRUN" snapshot snapsrc snap
	[ "$status" -eq 0 ]
	[ "$output" = snap ]
	timeout -k 2 60 "$LCRUN" run --image snap -- sh -c "$LIST" >"$T/after"
	diff "$T/before" "$T/after"
	[ ! -e "$T/outside" ]
	# the snapshot is the parent's layers plus one
	[ "$("$LCRUN" image inspect snap | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["layers"]))')" = 2 ]
	run "$LCRUN" snapshot snapsrc snap
	[ "$status" -eq 119 ]
	run "$LCRUN" snapshot nosuchsandbox snap2
	[ "$status" -eq 120 ]
	id=$(readlink "$LCRUN_STATE_DIR/names/snapsrc")
	rm -rf "$LCRUN_ROOT/sandboxes/$id" "$LCRUN_STATE_DIR/$id" "$LCRUN_STATE_DIR/names/snapsrc"
}

@test "run hashes an image's manifest and config once per version of their files, and refuses a changed one" {
	timeout -k 2 60 "$LCRUN" run --keep --name src -- sh -c 'echo x >/srv/f' >/dev/null
	"$LCRUN" snapshot src snap >/dev/null
	"$LCRUN" rm -f src
	m=$("$LCRUN" image inspect snap | python3 -c 'import json,sys; print(json.load(sys.stdin)["digest"][7:])')
	blob=$STORE/blobs/sha256/$m
	mark() { python3 -c 'import os, sys; print(os.getxattr(sys.argv[1], "user.lcrun.checked").decode())' "$1"; }
	unmark() {
		python3 -c 'import os, sys
for p in sys.argv[1:]:
    try: os.removexattr(p, "user.lcrun.checked")
    except OSError: pass' "$STORE"/blobs/sha256/*
	}
	# does a run of the image load libcrypto (which hashing needs)? yes/no
	crypto_loaded() {
		"$LCRUN" run --image snap -- sleep 30 &
		local rpid=$! n
		for _ in $(seq 100); do
			[ "$("$LCRUN" ps | grep -c ' running ')" -eq 1 ] && break
			sleep 0.05
		done
		n=$(grep -c libcrypto "/proc/$rpid/maps")
		kill -TERM "$rpid"
		wait "$rpid" || true
		[ "$n" -gt 0 ] && echo yes || echo no
	}
	# image inspect read them above: from blobs nobody checked, first by
	# lcrun create, whose monitor hashes them (and loads libcrypto for
	# it) itself
	unmark
	id=$("$LCRUN" create --image snap)
	[ "$("$LCRUN" exec "$id" -- cat /srv/f)" = x ]
	"$LCRUN" rm -f "$id"
	# checked, and marked with the digest and the file as it was then
	[[ "$(mark "$blob")" == "sha256:$m $(stat -c '%i %s' "$blob") "* ]]
	run timeout -k 2 60 "$LCRUN" run --image snap -- cat /srv/f
	[ "$status" -eq 0 ]
	[ "$output" = x ]
	# checked blobs are not hashed again: a run does not even load
	# libcrypto; blobs nobody checked are
	[ "$(crypto_loaded)" = no ]
	unmark
	[ "$(crypto_loaded)" = yes ]
	[[ "$(mark "$blob")" == "sha256:$m $(stat -c '%i %s' "$blob") "* ]]
	# the same bytes written again (a new modification time): hashed
	# again, found right, marked anew
	before=$(mark "$blob")
	sleep 0.01
	python3 -c 'import sys; p = sys.argv[1]; b = open(p, "rb").read(); open(p, "r+b").write(b)' "$blob"
	run timeout -k 2 60 "$LCRUN" run --image snap -- cat /srv/f
	[ "$status" -eq 0 ]
	[ "$(mark "$blob")" != "$before" ]
	# one byte changed in place (same inode, same size): refused in one
	# line naming the blob, and nothing is left of the attempt
	python3 - "$blob" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
i = b.index(b"sha256:") + 7
b[i] = ord("0") if b[i] != ord("0") else ord("1")
open(p, "r+b").write(b)
PY
	run timeout -k 2 60 "$LCRUN" run --image snap -- cat /srv/f
	[ "$status" -ne 0 ]
	[ "${#lines[@]}" -eq 1 ]
	[[ "$output" == *"blob sha256:$m is corrupt"* ]]
	[ -z "$(ls "$LCRUN_STATE_DIR" | grep '^[0-9a-f]\{12\}$')" ]
}

@test "snapshot of a host-image sandbox runs on the host's /usr with its changes" {
	busybox_image probe
	rc=0
	timeout -k 2 60 "$LCRUN" run --keep --name hostsrc -- sh -c \
		'echo tool >/usr/local/bin/lcrun-test-tool && chmod 755 /usr/local/bin/lcrun-test-tool && echo conf >/etc/lcrun-test.conf && mkdir -p /root/work && echo w >/root/work/f' || rc=$?
	id=$(readlink "$LCRUN_STATE_DIR/names/hostsrc")
	if [ "$(jq -r .idmapped "$LCRUN_STATE_DIR/$id/state.json")" = false ]; then
		rm -rf "$LCRUN_ROOT/sandboxes/$id" "$LCRUN_STATE_DIR/$id" "$LCRUN_STATE_DIR/names/hostsrc"
		skip "this host's /usr cannot be idmapped (9p in the VM suite); root inside cannot write to it"
	fi
	[ "$rc" -eq 0 ]
	"$LCRUN" snapshot hostsrc hostsnap
	[ "$("$LCRUN" image inspect hostsnap | python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["base"], len(j["layers"]))')" = "host 1" ]
	run timeout -k 2 60 "$LCRUN" run --image hostsnap -- sh -c 'cat /usr/local/bin/lcrun-test-tool /etc/lcrun-test.conf /root/work/f; test -x /usr/bin/env && echo host-usr'
	[ "$status" -eq 0 ]
	[ "$output" = "$(printf 'tool\nconf\nw\nhost-usr')" ]
	[ ! -e /usr/local/bin/lcrun-test-tool ] && [ ! -e /etc/lcrun-test.conf ]
	id=$(readlink "$LCRUN_STATE_DIR/names/hostsrc")
	rm -rf "$LCRUN_ROOT/sandboxes/$id" "$LCRUN_STATE_DIR/$id" "$LCRUN_STATE_DIR/names/hostsrc"
}

@test "a host-image sandbox's upper holds only what its command wrote; the shared /etc layer takes no tenant's writes" {
	timeout -k 2 60 "$LCRUN" run --keep --name fresh -- sh -c 'echo x >/srv/f'
	"$LCRUN" snapshot fresh freshsnap
	# no bind target (/etc/hosts, hostname, resolv.conf) made in the upper
	blob=$("$LCRUN" image inspect freshsnap | python3 -c 'import json,sys; print(json.load(sys.stdin)["layers"][-1]["digest"][7:])')
	[ "$(tar -tf "$STORE/blobs/sha256/$blob" | grep -v '/$' | sort | tr '\n' ' ')" = "srv/f " ]
	id=$(readlink "$LCRUN_STATE_DIR/names/fresh")
	rm -rf "$LCRUN_ROOT/sandboxes/$id" "$LCRUN_STATE_DIR/$id" "$LCRUN_STATE_DIR/names/fresh"
	# passwd and group per --user, from layers made once and shared
	run timeout -k 2 60 "$LCRUN" run --user 1000:1000 -- sh -c 'id -un; echo $HOME; grep -c . /etc/passwd; echo x >$HOME/left'
	[ "$status" -eq 0 ]
	[ "$output" = "$(printf 'user\n/home/user\n3')" ]
	run timeout -k 2 60 "$LCRUN" run -- sh -c 'id -un; echo $HOME; grep -c . /etc/passwd; echo z >>/etc/passwd'
	[ "$status" -eq 0 ]
	[ "$output" = "$(printf 'root\n/root\n2')" ]
	# the next tenants with the same ids see none of that
	run timeout -k 2 60 "$LCRUN" run --user 1000:1000 -- sh -c 'ls -A $HOME; grep -c . /etc/passwd'
	[ "$status" -eq 0 ]
	[ "$output" = "3" ]
	run timeout -k 2 60 "$LCRUN" run -- grep -c . /etc/passwd
	[ "$status" -eq 0 ]
	[ "$output" = "2" ]
	[ "$(find "$LCRUN_ROOT/host" -mindepth 2 -maxdepth 2 -name '*-etc-*' | wc -l)" -eq 2 ]
}

@test "sandboxes starting together on a fresh root wait for one skeleton builder" {
	# A builder holds the lock: a run on this fresh root waits for it and
	# builds nothing meanwhile, then takes the skeleton it finds or builds one.
	mkdir -p -m 0700 "$LCRUN_ROOT"
	mkdir -p "$LCRUN_ROOT/host"
	exec 8>"$LCRUN_ROOT/host/.build.lock"
	flock 8
	timeout -k 2 60 "$LCRUN" run -- true 8>&- &
	local pid=$!
	sleep 0.5
	kill -0 "$pid"
	[ -z "$(find "$LCRUN_ROOT/host" -mindepth 1 -maxdepth 1 ! -name .build.lock)" ]
	exec 8>&-
	wait "$pid"
	[ "$(find "$LCRUN_ROOT/host" -mindepth 1 -maxdepth 1 -type d | wc -l)" -eq 1 ]
	[ -z "$(find "$LCRUN_ROOT/host" -maxdepth 1 -name '.tmp-*')" ]
}

@test "snapshot while the command is still writing: frozen, consistent, thawed" {
	busybox_image base
	# every round appends i to f00, f01, … f19 in turn (one write each): a
	# frozen moment has the files' last values non-increasing and at most
	# one apart; a layer read while the writer runs sees later files ahead
	timeout -k 2 120 "$LCRUN" run --name writer --image base -- sh -c \
		'mkdir -p /data; i=0; while [ $i -lt 2000000 ]; do i=$((i+1)); for f in 00 01 02 03 04 05 06 07 08 09 10 11 12 13 14 15 16 17 18 19; do echo $i >>/data/f$f; done; done' &
	for _ in $(seq 100); do [ -L "$LCRUN_STATE_DIR/names/writer" ] && break; sleep 0.1; done
	sleep 1
	id=$(readlink "$LCRUN_STATE_DIR/names/writer")
	cg=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["cgroup"])' "$LCRUN_STATE_DIR/$id/state.json")
	for n in 1 2 3; do
		run "$LCRUN" snapshot writer "mid$n"
		[ "$status" -eq 0 ]
		[ "$(cat "$cg/cgroup.freeze")" = 0 ]   # thawed
		# read the layer blob the snapshot wrote
		blob=$STORE/blobs/sha256/$("$LCRUN" image inspect "mid$n" | python3 -c 'import json,sys; print(json.load(sys.stdin)["layers"][-1]["digest"][7:])')
		python3 - "$blob" <<'PY'
import sys, tarfile
t = tarfile.open(sys.argv[1])
vals = []
for k in range(20):
    lines = t.extractfile("data/f%02d" % k).read().split()
    vals.append(int(lines[-1]) if lines else 0)
    assert len(lines) in (vals[0], vals[0] - 1), (k, len(lines), vals)
print("last values", vals)
assert all(a >= b for a, b in zip(vals, vals[1:])), vals
assert vals[0] - vals[-1] <= 1, vals
PY
	done
	last=$(tar -xOf "$blob" data/f00 | tail -n1)
	for _ in $(seq 100); do
		grown=$(tail -n1 "$LCRUN_ROOT/sandboxes/$id/private/ovl/upper/data/f00")
		[ "$grown" -gt "$last" ] && break
		sleep 0.1
	done
	kill %1 2>/dev/null || true
	wait || true
	# it kept running after the snapshots
	[ "$grown" -gt "$last" ]
}

@test "fork 10 from one image: each its own upper, each status reported, unpacked once" {
	busybox_image base
	before=$(ls "$LCRUN_ROOT/layers" | wc -l)
	run timeout -k 2 120 "$LCRUN" fork base --count 10 --result "$T/r.json" -- sh -c \
		'test ! -e /mine && hostname >/mine && test -e /marker'
	echo "$output"
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | grep -c 'exited 0')" -eq 10 ]
	python3 - "$T/r.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert len(r) == 10, r
assert all(x["exit_code"] == 0 for x in r), r
assert len({x["id"] for x in r}) == 10, r
PY
	[ "$(ls "$LCRUN_ROOT/layers" | wc -l)" -eq "$before" ]
	run timeout -k 2 120 "$LCRUN" fork base --count 3 -- sh -c 'exit 3'
	[ "$status" -eq 3 ]
	[ "$(echo "$output" | grep -c 'exited 3')" -eq 3 ]
	run "$LCRUN" fork base -- true
	[ "$status" -eq 123 ]
	run "$LCRUN" fork nosuch --count 2 -- true
	[ "$status" -eq 120 ]
}

@test "build: images/busybox.json builds, runs, and a second build runs no step" {
	busybox_image probe
	cp -r "$BATS_TEST_DIRNAME/../../images" "$T/images"
	run timeout -k 2 300 "$LCRUN" image build "$T/images/busybox.json"
	echo "$output"
	[ "$status" -eq 0 ]
	[ "${lines[-1]}" = busybox ]
	run timeout -k 2 60 "$LCRUN" run --image busybox -- sh -c 'echo $HOME; wget --help >/dev/null 2>&1 && echo applets'
	[ "$output" = "$(printf '/root\napplets')" ]
	run "$LCRUN" image build "$T/images/busybox.json"
	[ "$status" -eq 0 ]
	steps=$(echo "$output" | grep -c '^lcrun build: step [2-9]')
	[ "$(echo "$output" | grep -c ': cached$')" -eq "$steps" ]
	# a changed step runs again, the ones before it stay cached
	python3 - "$T/images/busybox.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["steps"].append({"env": {"EXTRA": "1"}})
json.dump(d, open(sys.argv[1], "w"))
PY
	run "$LCRUN" image build "$T/images/busybox.json"
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | grep -v ': cached$' | grep -c 'step [2-9]')" -eq 1 ]
	# secrets reach the run step's environment, never the image
	cat >"$T/images/secret.json" <<'JSON'
{"name": "secret-test", "from": "busybox", "steps": [{"run": "test \"$TOKEN\" = s3cr3t && echo ok >/ran"}]}
JSON
	run timeout -k 2 60 "$LCRUN" image build "$T/images/secret.json" --secret TOKEN=s3cr3t
	[ "$status" -eq 0 ]
	if grep -rq s3cr3t "$STORE/blobs"; then false; fi
	run timeout -k 2 60 "$LCRUN" run --image secret-test -- sh -c 'cat /ran; echo "[$TOKEN]"'
	[ "$output" = "$(printf 'ok\n[]')" ]
}

@test "build: debian-12 and agent-cli from Debian's mirror and npm (takes minutes)" {
	[ -z "${LCRUN_SKIP_SLOW:-}" ] || skip "LCRUN_SKIP_SLOW is set"
	busybox_image probe
	curl -sf -m 10 -o /dev/null http://deb.debian.org/debian/dists/bookworm/Release ||
		skip "Debian's mirror cannot be reached from this host"
	curl -sf -m 10 -o /dev/null https://registry.npmjs.org/@anthropic-ai%2fclaude-code ||
		skip "the npm registry cannot be reached from this host"
	ip=$(getent ahostsv4 deb.debian.org | awk '{print $1; exit}')
	out=$(timeout -k 2 60 "$LCRUN" run --net open -- curl -sf -m 10 -o /dev/null --resolve "deb.debian.org:80:$ip" \
		http://deb.debian.org/debian/dists/bookworm/Release 2>&1) ||
		skip "a sandbox with --net open cannot reach Debian's mirror: $out"
	run timeout -k 2 1800 "$LCRUN" image build "$BATS_TEST_DIRNAME/../../images/debian-12.json"
	[ "$status" -eq 0 ]
	run timeout -k 2 60 "$LCRUN" run --image debian-12 -- sh -c '. /etc/os-release; echo $VERSION_ID'
	[ "$output" = 12 ]
	run timeout -k 2 1800 "$LCRUN" image build "$BATS_TEST_DIRNAME/../../images/agent-cli.json"
	echo "$output" | tail -20
	[ "$status" -eq 0 ]
	run timeout -k 2 60 "$LCRUN" run --image agent-cli -- sh -c \
		'pwd; echo $IS_SANDBOX; for c in claude codex git rg node; do command -v $c >/dev/null || echo missing $c; done'
	[ "$output" = "$(printf '/workspace\n1')" ]
}
