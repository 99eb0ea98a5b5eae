#!/usr/bin/env bats
bats_require_minimum_version 1.5.0
# Kubernetes' path to lcrun-oci without kubelet: containerd's CRI plugin
# (a private instance from contrib/oci/containerd-config.toml), the runc
# shim with BinaryName lcrun-oci as the runtime handler "lcrun", CNI bridge
# + host-local, driven by cri-client.py as kubelet drives a node.  Run as
# root.  The images are made here; nothing is pulled.
# Not in the VM suite: under TCG the two pods take about 15 minutes (containerd,
# shims, Python and gRPC all emulated), more than CI's time allows.  By hand
# it passes there, stats and cpu shares included:
#   tests/vm/check-vm build tests/integration/cri.bats

load helpers
load oci-lib
load cri-lib

setup_file() {
	[ "$(id -u)" = 0 ] || skip "needs root"
	export CRI_DIR="$BATS_FILE_TMPDIR/cri"
	command -v containerd >/dev/null && command -v ctr >/dev/null || return 0
	[ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] || return 0
	/usr/bin/python3 -c 'import grpc, grpc_tools' 2>/dev/null || return 0
	command -v cc >/dev/null || return 0
	# The bridge CNI attaches pods to, made before any test looks at the host.
	ip link add "$CRI_BRIDGE" type bridge 2>/dev/null || true
	ip link set "$CRI_BRIDGE" up
	# containerd's own tmpfs: its overlay snapshots need an upper that is
	# not itself overlayfs (the VM's root is)
	mkdir -p "$CRI_DIR"
	mount -t tmpfs -o mode=0700 lcrun-cri "$CRI_DIR"
	ip netns list | awk '{ print $1 }' > "$CRI_DIR/netns.before"
	cri_start && cri_images && touch "$CRI_DIR/ready"
}

teardown_file() {
	[ -n "${CRI_DIR:-}" ] || return 0
	cri_stop
	# what a failed test's pods left: their processes, shims, mounts, netns
	local id pid m ns
	for id in $(ls "$CRI_DIR/lcrun-oci/k8s.io" 2>/dev/null); do
		"$LCRUN_OCI" --root "$CRI_DIR/lcrun-oci/k8s.io" delete --force "$id" >/dev/null 2>&1 || true
	done
	for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $CRI_DIR/sock"); do
		kill "$pid" 2>/dev/null || true
	done
	for m in $(awk -v d="$CRI_DIR" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r); do
		umount -l "$m" 2>/dev/null || true
	done
	for ns in $(ip netns list | awk '$1 ~ /^cni-/ { print $1 }'); do
		grep -qx "$ns" "$CRI_DIR/netns.before" 2>/dev/null || ip netns del "$ns" 2>/dev/null || true
	done
	ip link del "$CRI_BRIDGE" 2>/dev/null || true
	local cg
	cg=$(cgroup2_root)
	[ -d "$cg/$CRI_CG_PARENT" ] && find "$cg/$CRI_CG_PARENT" -depth -mindepth 1 -type d -exec rmdir {} + 2>/dev/null
	rmdir "$cg/$CRI_CG_PARENT" 2>/dev/null || true
	rm -rf "$CRI_DIR" 2>/dev/null || true
}

setup() {
	[ "$(id -u)" = 0 ] || skip "needs root"
	[ -f "$CRI_DIR/ready" ] || skip "containerd, CNI plugins, python3-grpcio/grpc-tools or cc missing, or containerd did not start (contrib/install-deps); see $CRI_DIR/log"
	cri_host_state > "$BATS_TEST_TMPDIR/cri.before"
}

teardown() {
	# pods a failed test left behind (what kubelet would remove)
	local p
	for p in $(cat "$BATS_TEST_TMPDIR/pods" 2>/dev/null); do
		cric call StopPodSandbox "{\"pod_sandbox_id\": \"$p\"}" >/dev/null 2>&1 || true
		cric call RemovePodSandbox "{\"pod_sandbox_id\": \"$p\"}" >/dev/null 2>&1 || true
	done
	[ -d "$CRI_DIR/prop" ] && umount -R "$CRI_DIR/prop" 2>/dev/null || true
}

run_pod() { # NAME [FILTER] -> prints the sandbox id
	mkdir -p "$CRI_DIR/logs/$1"
	local id
	id=$(cric call RunPodSandbox "$(jq -n --argjson c "$(pod_config "$@")" '{config: $c, runtime_handler: "lcrun"}')" |
		jq -r .pod_sandbox_id) || return 1
	echo "$id" >> "$BATS_TEST_TMPDIR/pods"
	echo "$id"
}

start_ctr() { # POD-ID POD-NAME CONTAINER-CONFIG-JSON -> prints the container id
	local id
	id=$(cric call CreateContainer "$(jq -n --arg p "$1" --argjson c "$3" --argjson s "$(pod_config "$2")" \
		'{pod_sandbox_id: $p, config: $c, sandbox_config: $s}')" | jq -r .container_id) || return 1
	cric call StartContainer "{\"container_id\": \"$id\"}" >/dev/null || return 1
	echo "$id"
}

state_of() { # CONTAINER-ID
	cric call ContainerStatus "{\"container_id\": \"$1\"}" | jq -r '.status.state // "CONTAINER_CREATED"'
}

exec_sync() { # CONTAINER-ID CMD... -> stdout; status = the command's
	local r
	local cmd
	local a
	cmd=$(for a in "${@:2}"; do jq -n --arg a "$a" '$a'; done | jq -s .)
	r=$(cric call ExecSync "$(jq -n --arg c "$1" --argjson cmd "$cmd" '{container_id: $c, cmd: $cmd, timeout: 30}')") || return 99
	echo "$r" | jq -r '(.stdout // "") | @base64d' | tr -d '\r'
	return "$(echo "$r" | jq -r '.exit_code // 0')"
}

wait_for_log() { # FILE TEXT
	for _ in $(seq 1 100); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "no '$2' in $1:" >&2
	cat "$1" >&2 2>/dev/null
	return 1
}

# Kubelet's order: stop and remove each container, then the sandbox.
remove_pod() { # POD-ID CONTAINER-ID...
	local c
	for c in "${@:2}"; do
		cric call StopContainer "{\"container_id\": \"$c\", \"timeout\": 2}" >/dev/null || return 1
		[ "$(state_of "$c")" = CONTAINER_EXITED ] || { echo "container $c: $(state_of "$c") after stop" >&2; return 1; }
		cric call RemoveContainer "{\"container_id\": \"$c\"}" >/dev/null || return 1
	done
	cric call StopPodSandbox "{\"pod_sandbox_id\": \"$1\"}" >/dev/null || return 1
	cric call RemovePodSandbox "{\"pod_sandbox_id\": \"$1\"}" >/dev/null || return 1
	sed -i "/^$1\$/d" "$BATS_TEST_TMPDIR/pods"
}

assert_cri_clean() { # POD-NAME...: kubelet removes the pods' own cgroups itself
	local cg p
	cg=$(cgroup2_root)
	for p in "$@"; do
		rmdir "$cg/$CRI_CG_PARENT/$p" 2>/dev/null || true
	done
	rmdir "$cg/$CRI_CG_PARENT" 2>/dev/null || true
	cri_host_state > "$BATS_TEST_TMPDIR/cri.after"
	if ! diff -u "$BATS_TEST_TMPDIR/cri.before" "$BATS_TEST_TMPDIR/cri.after"; then
		echo "the host changed (see the diff above)" >&2
		return 1
	fi
}

@test "CRI pod on lcrun-oci: two containers share localhost; CRI logs, exec, exec --tty, stats; stop and remove leave nothing" {
	local pod web client
	pod=$(run_pod p1)
	run cric call PodSandboxStatus "{\"pod_sandbox_id\": \"$pod\"}"
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | jq -r '.status.state // "SANDBOX_READY"')" = SANDBOX_READY ]
	[ "$(echo "$output" | jq -r .status.runtime_handler)" = lcrun ]
	[[ "$(echo "$output" | jq -r .status.network.ip)" == 198.18.77.* ]]
	# the sandbox's process is lcrun-oci's
	[ -d "$CRI_DIR/lcrun-oci/k8s.io/$pod" ]

	mkdir -p "$CRI_DIR/www"
	echo hello-from-web > "$CRI_DIR/www/index.html"
	web=$(start_ctr "$pod" p1 "$(ctr_config web '["httpd", "-f", "-p", "127.0.0.1:8080", "-h", "/www"]' \
		'.mounts = [{container_path: "/www", host_path: $www, readonly: true}]' --arg www "$CRI_DIR/www")")
	client=$(start_ctr "$pod" p1 "$(ctr_config client '["sh", "-c", "for i in $(seq 1 50); do wget -q -O - http://127.0.0.1:8080/ && break; sleep 0.1; done; echo to-stderr >&2; exec sleep 2037"]')")
	[ "$(state_of "$web")" = CONTAINER_RUNNING ]

	# localhost in the pod's network namespace (CNI's), shared by both
	local log="$CRI_DIR/logs/p1/client.log"
	wait_for_log "$log" "to-stderr"
	run exec_sync "$client" readlink /proc/self/ns/net
	local ns_client=$output
	run exec_sync "$web" readlink /proc/self/ns/net
	[ "$output" = "$ns_client" ]
	run exec_sync "$client" ip -o -4 addr show eth0
	[[ "$output" == *" 198.18.77."* ]]

	# the CRI log format: TIMESTAMP STREAM P|F TEXT, one line each
	grep -qx '[0-9-]*T[0-9:.]*Z stdout F hello-from-web' "$log"
	grep -qx '[0-9-]*T[0-9:.]*Z stderr F to-stderr' "$log"
	run grep -cvE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z (stdout|stderr) [PF] ' "$log"
	[ "$output" = 0 ]
	# the runtime's own words (a warning) go to its log, never the container's
	run ! grep -q lcrun-oci "$log"

	# exec: output, stderr apart, exit code
	run exec_sync "$client" sh -c 'echo out; echo err >&2; exit 7'
	[ "$status" -eq 7 ]
	[ "$output" = out ]
	# exec with a terminal (kubectl exec -it): the streaming server's WebSocket
	local url
	url=$(cric call Exec "{\"container_id\": \"$client\", \"cmd\": [\"sh\", \"-c\", \"read l; tty; echo got \$l; exit 3\"], \"tty\": true, \"stdin\": true, \"stdout\": true}" | jq -r .url)
	run cric exec "$url" --stdin $'line1\n'
	[ "$status" -eq 3 ]
	[[ "$output" == *"/dev/pts/"* ]]
	[[ "$output" == *"got line1"* ]]

	# stats: the shim reads the container's cgroup (cgroup v1 on a hybrid
	# host, where lcrun-oci's containers are not: the values are then the
	# v1 root's; see docs/guides/oci.md)
	run cric call ContainerStats "{\"container_id\": \"$web\"}"
	[ "$status" -eq 0 ]
	local mem cpu
	mem=$(echo "$output" | jq -r '.stats.memory.working_set_bytes.value // 0')
	cpu=$(echo "$output" | jq -r '.stats.cpu.usage_core_nano_seconds.value // 0')
	[ "$mem" -gt 0 ]
	[ "$cpu" -gt 0 ]
	if [ "$(stat -f -c %T /sys/fs/cgroup)" = cgroup2fs ]; then
		[ "$mem" -lt 67108864 ] # the container's own, not the host's
	fi

	remove_pod "$pod" "$client" "$web"
	assert_cri_clean p1
}

@test "CRI pod on lcrun-oci as Kubernetes sets securityContext: mountPropagation, read-only root, non-root user, no privilege escalation" {
	# a shared host mount, as mountPropagation needs (containerd checks)
	local src="$CRI_DIR/prop"
	mkdir -p "$src"
	mount -t tmpfs lcrun-cri-prop "$src"
	mount --make-shared "$src"
	echo before > "$src/f"
	local pod c
	pod=$(run_pod p2)
	c=$(start_ctr "$pod" p2 "$(ctr_config sec '["sleep", "2037"]' '
		.mounts = [{container_path: "/host", host_path: $src, propagation: "PROPAGATION_HOST_TO_CONTAINER"}]
		| .linux.security_context += {run_as_user: {value: 1000}, run_as_group: {value: 1000},
			readonly_rootfs: true, no_new_privs: true, capabilities: {drop_capabilities: ["ALL"]},
			seccomp: {profile_type: "RuntimeDefault"}}' --arg src "$src")")
	[ "$(state_of "$c")" = CONTAINER_RUNNING ]
	run exec_sync "$c" sh -c 'id -u; id -g; grep -E "^(NoNewPrivs|CapEff|Seccomp):" /proc/self/status | tr -s "\t " " "'
	[ "$status" -eq 0 ]
	# seccomp RuntimeDefault: containerd's profile, compiled by lcrun-oci (2: filtering)
	[ "$(echo "$output" | tr '\n' ' ')" = "1000 1000 CapEff: 0000000000000000 NoNewPrivs: 1 Seccomp: 2 " ]
	run exec_sync "$c" sh -c 'touch /new 2>&1; cat /host/f'
	[[ "$output" == *"Read-only file system"* ]]
	[[ "$output" == *before* ]]
	# HostToContainer: a mount made on the host later shows in the container
	mkdir -p "$src/late"
	mount -t tmpfs lcrun-cri-late "$src/late"
	echo after > "$src/late/g"
	run exec_sync "$c" cat /host/late/g
	[ "$output" = after ]
	run exec_sync "$c" awk '$5 == "/host" { for (i = 7; $i != "-"; i++) if ($i ~ /^master:/) print "slave" }' /proc/self/mountinfo
	[ "$output" = slave ]
	remove_pod "$pod" "$c"
	umount "$src/late"
	umount "$src"
	assert_cri_clean p2
}
