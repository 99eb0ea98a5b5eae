# Shared set-up for cri.bats: a private containerd with its CRI plugin, two
# runtime handlers on the runc shim (lcrun: BinaryName lcrun-oci; runc),
# CNI bridge + host-local from Debian's containernetworking-plugins, and
# images made here (a static pause, the host's busybox): nothing is pulled.
#
# Facts of the machines this runs on (measured):
# - root cannot lower oom_score_adj, and CRI gives the sandbox -998:
#   restrict_oom_score_adj = true (runc needs it too);
# - containerd asks for cpu shares (2 for the sandbox, the pod's request
#   for containers): where cgroup v2 has no cpu controller (a hybrid host)
#   lcrun-oci applies no weight (lcrun-oci(8), linux.resources.cpu; docs/guides/oci.md).

: "${LCRUN_OCI:=$(dirname "$LCRUN")/lcrun-oci}"
export LCRUN_OCI
CRI_CLIENT="$BATS_TEST_DIRNAME/cri-client.py"
CRI_BRIDGE=lcrcri0
CRI_SUBNET=198.18.77.0/24          # the benchmarking range: never routed, no traffic leaves
CRI_CG_PARENT=lcrun-cri-test       # cgroup parent of every pod made here
CRI_PAUSE=localhost/lcrun-cri-pause:1
CRI_BB=localhost/lcrun-cri-bb:1

# The containerd configuration: contrib/oci/containerd-config.toml with
# this run's paths, so what the test proves is what the file says.
cri_config() { # DIR
	local d=$1
	sed -e "s|^root = .*|root = \"$d/root\"|" -e "s|^state = .*|state = \"$d/state\"|" \
		-e "s|^  address = .*|  address = \"$d/sock\"|" \
		-e "s|sandbox_image = .*|sandbox_image = \"$CRI_PAUSE\"|" \
		-e "s|BinaryName = .*|BinaryName = \"$LCRUN_OCI\"|" \
		-e "s|Root = \"/run/containerd/\\(.*\\)\"|Root = \"$d/\\1\"|" \
		-e "s|conf_dir = .*|conf_dir = \"$d/cni\"|" \
		"$BATS_TEST_DIRNAME/../../contrib/oci/containerd-config.toml" > "$d/config.toml"
	printf '[plugins."io.containerd.internal.v1.opt"]\n  path = "%s/opt"\n' "$d" >> "$d/config.toml"
	mkdir -p "$d/cni"
	cat > "$d/cni/10-lcrun-cri-test.conflist" <<-EOF
		{"cniVersion": "0.4.0", "name": "lcrun-cri-test", "plugins": [
		  {"type": "bridge", "bridge": "$CRI_BRIDGE", "isGateway": false, "ipMasq": false,
		   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$CRI_SUBNET"}]], "dataDir": "$d/ipam"}}]}
	EOF
}

cri_start() {
	local d=$CRI_DIR
	mkdir -p "$d"
	cri_config "$d"
	containerd --config "$d/config.toml" > "$d/log" 2>&1 &
	echo $! > "$d/pid"
	for _ in $(seq 1 100); do
		cric call Version >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	return 1
}

cri_stop() {
	local d=$CRI_DIR
	[ -f "$d/pid" ] || return 0
	kill "$(cat "$d/pid")" 2>/dev/null || true
	for _ in $(seq 1 50); do
		kill -0 "$(cat "$d/pid")" 2>/dev/null || break
		sleep 0.1
	done
	rm -f "$d/pid"
}

cric() {
	CRI_CLIENT_PB_DIR="$CRI_DIR/pb" /usr/bin/python3 "$CRI_CLIENT" --socket "$CRI_DIR/sock" "$@"
}

ctr_k8s() {
	ctr --address "$CRI_DIR/sock" -n k8s.io "$@"
}

# The images: a static pause (tests/fixtures/pause.c) and the host's busybox.
cri_images() {
	local d=$CRI_DIR/img
	mkdir -p "$d/pause" "$d/bb"
	cc -static -O2 -o "$d/pause/pause" "$BATS_TEST_DIRNAME/../fixtures/pause.c" || return 1
	/usr/bin/python3 "$CRI_CLIENT" image "$d/pause" "$CRI_PAUSE" "$d/pause.tar" --entrypoint '["/pause"]' || return 1
	oci_make_rootfs "$d/bb"
	/usr/bin/python3 "$CRI_CLIENT" image "$d/bb" "$CRI_BB" "$d/bb.tar" || return 1
	ctr_k8s images import "$d/pause.tar" >/dev/null && ctr_k8s images import "$d/bb.tar" >/dev/null
}

# A pod sandbox config as kubelet sends it; extra jq filter optional.
pod_config() { # NAME [FILTER]
	jq -n --arg n "$1" --arg logs "$CRI_DIR/logs/$1" --arg cg "/$CRI_CG_PARENT/$1" '{
		metadata: {name: $n, uid: ("uid-" + $n), namespace: "default", attempt: 0},
		hostname: $n, log_directory: $logs,
		linux: {cgroup_parent: $cg, security_context: {namespace_options: {network: "POD", pid: "CONTAINER", ipc: "POD"}}}
	}' | jq "${2:-.}"
}

# A container config as kubelet sends it for a busybox container.
ctr_config() { # NAME ARGS-JSON [FILTER [JQ-ARGS...]]
	local f=${3:-.}
	jq -n --arg n "$1" --argjson a "$2" --arg img "$CRI_BB" '{
		metadata: {name: $n, attempt: 0}, image: {image: $img}, command: $a,
		log_path: ($n + ".log"), envs: [{key: "POD_NAME", value: "p"}],
		linux: {resources: {cpu_shares: 2, oom_score_adj: 1000},
			security_context: {namespace_options: {network: "POD", pid: "CONTAINER", ipc: "POD"}}}
	}' | jq "$f" "${@:4}"
}

# What a pod may leave on the host: mounts (rootfs, shm, the netns pin),
# network namespaces and veths from CNI, its cgroups, the shims, the
# runtimes' state, CNI's addresses.  Only these: the host's other
# sandboxes (other suites running at the same time) are not a pod's.
cri_host_state() {
	echo "== mounts"
	awk -v d="$CRI_DIR" 'index($5, d) == 1 || $5 ~ /\/netns\/cni-/ { print $5, $9 }' /proc/self/mountinfo | sort
	echo "== netns"
	ip netns list 2>/dev/null | awk '$1 ~ /^cni-/ { print $1 }' | sort
	echo "== links"
	ip -o link show master "$CRI_BRIDGE" 2>/dev/null | awk -F': ' '{ print $2 }' | sed 's/@.*//' | sort
	echo "== cgroups"
	local cg
	cg=$(cgroup2_root)
	[ -d "$cg/$CRI_CG_PARENT" ] && find "$cg/$CRI_CG_PARENT" -mindepth 1 -type d -printf '%P\n' | sort
	echo "== runtime state"
	find "$CRI_DIR/lcrun-oci" "$CRI_DIR/runc" -mindepth 2 -maxdepth 2 2>/dev/null | sort
	echo "== cni addresses"
	find "$CRI_DIR/ipam" -type f ! -name 'last_reserved_ip*' ! -name lock 2>/dev/null | sort
	echo "== shims"
	pgrep -f "containerd-shim-runc-v2 .*-address $CRI_DIR/sock" || true
	true
}
