#!/usr/bin/env bats
# lcrun image push|pull through an OCI registry (Debian's docker-registry,
# private, in a network namespace of the test's own); skopeo reads what
# lcrun pushed.  Needs root.

load helpers
load registry-lib

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root"
	T=$(mktemp -d /tmp/lcrun-registry.XXXXXX)
	registry_start "lcreg-$$" "$T/registry"
	# two stores, as two hosts have
	mkdir -p "$T/src/etc" "$T/src/bin" && echo hello >"$T/src/hello" && echo conf >"$T/src/etc/conf"
	cp /bin/busybox "$T/src/bin/busybox" && ln -s busybox "$T/src/bin/cat"
	A="env LCRUN_ROOT=$T/a LCRUN_STATE_DIR=$T/a-run"
	B="env LCRUN_ROOT=$T/b LCRUN_STATE_DIR=$T/b-run"
	$A "$LCRUN" image import "$T/src" --name base >/dev/null
}

teardown() {
	registry_stop
	rm -rf "$T"
}

REF=127.0.0.1:5000/lcrun/base

@test "registry: push and pull an image: same digest, skopeo reads it, known blobs are not moved again" {
	command -v skopeo >/dev/null || skip "no skopeo (the Debian package)"
	run reg_ns $A "$LCRUN" image push base "$REF:v1" --json
	echo "$output"
	[ "$status" -eq 0 ]
	digest=$(echo "$output" | jq -r .digest)
	[ "$digest" = "$($A "$LCRUN" image inspect base | jq -r .digest)" ]
	echo "$output" | jq -e '.blobs == 2 and .sent == 2'
	# again: the registry has every blob
	reg_ns $A "$LCRUN" image push base "$REF:v2" --json | jq -e '.sent == 0'
	# another client reads it, with the digest we pushed
	reg_ns skopeo inspect --tls-verify=false "docker://$REF:v1" >"$T/sk.json"
	[ "$(jq -r .Digest "$T/sk.json")" = "$digest" ]
	reg_ns skopeo copy --src-tls-verify=false "docker://$REF:v1" "dir:$T/sk" >/dev/null
	layer=$($A "$LCRUN" image inspect base | jq -r '.layers[0].digest')
	[ "$(sha256sum <"$T/sk/${layer#sha256:}" | cut -d' ' -f1)" = "${layer#sha256:}" ]
	# into the other store: every blob fetched, the same image
	run reg_ns $B "$LCRUN" image pull copy "$REF:v1"
	echo "$output"
	[ "$status" -eq 0 ]
	[[ "${lines[0]}" == "pulled $REF:v1 as copy: 2 of 2 blobs fetched"* ]]
	[ "$($B "$LCRUN" image inspect copy | jq -r .digest)" = "$digest" ]
	[ "$($B "$LCRUN" run --image copy -- /bin/cat /hello)" = hello ]
	# again under another name, by digest: nothing to fetch but the manifest
	run reg_ns $B "$LCRUN" image pull again "$REF@$digest" --json
	echo "$output"
	echo "$output" | jq -e --arg d "$digest" '.fetched == 0 and .blobs == 2 and .digest == $d'
}

@test "registry: a blob that does not match its digest is refused; nothing is left of the pull" {
	reg_ns $A "$LCRUN" image push base "$REF:v1" >/dev/null
	layer=$($A "$LCRUN" image inspect base | jq -r '.layers[0].digest')
	data=$(find "$T/registry/data" -path "*/blobs/sha256/*/${layer#sha256:}/data")
	[ -f "$data" ]
	printf 'X' | dd of="$data" bs=1 seek=600 conv=notrunc 2>/dev/null
	run reg_ns $B "$LCRUN" image pull copy "$REF:v1"
	echo "$output"
	[ "$status" -eq 121 ]
	[[ "$output" == "lcrun: pull $REF:v1: "*"not the blob asked for"* ]]
	run $B "$LCRUN" image inspect copy
	[ "$status" -eq 120 ]
	[ -z "$(ls "$T/b/tmp" 2>/dev/null)" ]
	# a digest that is not the manifest's
	run reg_ns $B "$LCRUN" image pull copy "$REF@sha256:$(printf '%064d' 0)"
	[ "$status" -ne 0 ]
}

@test "registry: bad input: one line, a distinct code" {
	run "$LCRUN" image push base nohost
	[ "$status" -eq 123 ]
	[[ "$output" == "lcrun: registry reference 'nohost': expected REGISTRY/REPOSITORY"* ]]
	run "$LCRUN" image push base 127.0.0.1:5000/UPPER:x
	[ "$status" -eq 123 ]
	run $A "$LCRUN" image push nosuch "$REF:v1"
	[ "$status" -eq 120 ]
	run reg_ns $B "$LCRUN" image pull x "$REF:missing"
	[ "$status" -eq 120 ]
	[[ "$output" == *"the registry has no such image"* ]]
	run reg_ns $A "$LCRUN" image pull base "$REF:v1"
	[ "$status" -eq 119 ]
}
