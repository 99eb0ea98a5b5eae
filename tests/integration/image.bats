#!/usr/bin/env bats
# lcrun image …: the store as a user drives it (as root).
# The store lives in a temporary LCRUN_ROOT; no sandbox is started here.

setup() {
	LCRUN=${LCRUN:-$BATS_TEST_DIRNAME/../../build/lcrun}
	MKTAR="python3 $BATS_TEST_DIRNAME/../fixtures/mktar.py"
	T=$(mktemp -d /var/tmp/lcrun-image-bats.XXXXXX)
	export LCRUN_ROOT=$T/root LCRUN_STATE_DIR=$T/state
	mkdir -p "$LCRUN_STATE_DIR"
	STORE=$LCRUN_ROOT/images
}

teardown() {
	rm -rf "$T"
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
