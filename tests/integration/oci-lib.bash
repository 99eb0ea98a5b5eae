# Shared set-up for oci.bats: a busybox root made here (no image is ever
# downloaded), a private Podman store and configuration, a private
# containerd, and the host state an OCI runtime may leave behind.

: "${LCRUN_OCI:=$(dirname "$LCRUN")/lcrun-oci}"
export LCRUN_OCI
OCI_CG_PARENT=lcrun-oci-test     # cgroup parent of every container made here
CTR_NS=lcrun-oci-test            # containerd namespace (its cgroups go under /lcrun-oci-test too)

# A root filesystem of the host's static busybox, as a directory and a tar.
oci_make_rootfs() { # DIR
	local d=$1
	mkdir -p "$d"/{bin,proc,sys,dev,tmp,etc,root,run}
	cp /bin/busybox "$d/bin/busybox"
	local a
	for a in $("$d/bin/busybox" --list); do
		[ -e "$d/bin/$a" ] || ln -s busybox "$d/bin/$a"
	done
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n' > "$d/etc/passwd"
	printf 'root:x:0:\nnobody:x:65534:\n' > "$d/etc/group"
}

# A bundle whose config.json is lcrun-oci spec's default, running ARGS.
oci_make_bundle() { # DIR ARGS-JSON
	local b=$1
	mkdir -p "$b"
	cp -a "$OCI_ROOTFS" "$b/rootfs"
	(cd "$b" && "$LCRUN_OCI" spec)
	jq --argjson a "$2" '.process.args = $a | .process.terminal = false | .root.readonly = false' \
		"$b/config.json" > "$b/c.tmp" && mv "$b/c.tmp" "$b/config.json"
}

# Change the bundle's config with a jq filter.
oci_config() { # BUNDLE FILTER [jq args...]
	local b=$1 f=$2
	shift 2
	jq "$@" "$f" "$b/config.json" > "$b/c.tmp" && mv "$b/c.tmp" "$b/config.json"
}

podman_conf() { # FILE
	cat > "$1" <<-EOF
		[containers]
		pids_limit = 0
		default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
		[engine]
		cgroup_manager = "cgroupfs"
		events_logger = "file"
		runtime = "lcrun-oci"
		[engine.runtimes]
		lcrun-oci = ["$LCRUN_OCI"]
	EOF
}

pod() {
	CONTAINERS_CONF="$OCI_DIR/containers.conf" podman --root "$OCI_DIR/podman/root" \
		--runroot "$OCI_DIR/podman/run" --storage-driver vfs --tmpdir "$OCI_DIR/podman/tmp" "$@"
}

# podman run with the options every test here uses
pod_run() {
	pod run --rm --network none --cgroup-parent "/$OCI_CG_PARENT" "$@"
}

ctrd_start() {
	local d=$OCI_DIR/containerd
	mkdir -p "$d"
	cat > "$d/config.toml" <<-EOF
		version = 2
		root = "$d/root"
		state = "$d/state"
		disabled_plugins = ["io.containerd.grpc.v1.cri"]
		[grpc]
		  address = "$d/sock"
	EOF
	containerd --config "$d/config.toml" > "$d/log" 2>&1 &
	echo $! > "$d/pid"
	for _ in $(seq 1 100); do
		ctr --address "$d/sock" version >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	return 1
}

ctrd_stop() {
	local d=$OCI_DIR/containerd
	[ -f "$d/pid" ] || return 0
	kill "$(cat "$d/pid")" 2>/dev/null || true
	for _ in $(seq 1 50); do
		kill -0 "$(cat "$d/pid")" 2>/dev/null || break
		sleep 0.1
	done
	rm -f "$d/pid"
	rm -rf "/run/containerd/runc/$CTR_NS"
}

ctrc() {
	ctr --address "$OCI_DIR/containerd/sock" -n "$CTR_NS" "$@"
}

# What an OCI runtime may leave on the host, beyond helpers.bash's list:
# containers' state, their cgroups, processes.
oci_host_state() {
	host_state
	echo "== oci state"
	ls -1 "$LCRUN_OCI_ROOT" 2>/dev/null || true
	echo "== oci cgroups"
	local cg
	cg=$(cgroup2_root)
	local p
	# (conmon's own cgroup, Podman's, stays while Podman is used)
	for p in "$OCI_CG_PARENT" lcrun-oci; do
		[ -d "$cg/$p" ] && find "$cg/$p" -mindepth 1 -type d ! -name conmon -printf '%P\n' | sort
	done
	echo "== processes"
	pgrep -fx "sleep 1037" || true
}

oci_snapshot() {
	oci_host_state > "$BATS_TEST_TMPDIR/oci.before"
}

assert_oci_clean() {
	oci_host_state > "$BATS_TEST_TMPDIR/oci.after"
	if ! diff -u "$BATS_TEST_TMPDIR/oci.before" "$BATS_TEST_TMPDIR/oci.after"; then
		echo "the host changed (see the diff above)" >&2
		return 1
	fi
}
