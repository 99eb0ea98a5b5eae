# A private OCI registry for a test: Debian's docker-registry, its storage
# in $1/data, listening on 127.0.0.1:5000 inside the network namespace
# $REG_NS the test makes (reg_ns runs a command there: nothing leaves it).
#
#   registry_start NS DIR;  reg_ns CMD…;  registry_stop

registry_start() { # NS DIR
	command -v docker-registry >/dev/null || skip "no docker-registry (the Debian package)"
	REG_NS=$1 REG_DIR=$2
	if [ ! -e "/run/netns/$REG_NS" ]; then
		ip netns add "$REG_NS"
		ip -n "$REG_NS" link set lo up
		REG_OWN_NS=1
	fi
	mkdir -p "$REG_DIR/data"
	cat >"$REG_DIR/config.yml" <<YML
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $REG_DIR/data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:5000
YML
	nsenter --net="/run/netns/$REG_NS" docker-registry serve "$REG_DIR/config.yml" >>"$REG_DIR/log" 2>&1 &
	REG_PID=$!
	for _ in $(seq 100); do
		reg_ns curl -sf -o /dev/null http://127.0.0.1:5000/v2/ && return 0
		sleep 0.1
	done
	cat "$REG_DIR/log" >&2
	return 1
}

reg_ns() { nsenter --net="/run/netns/$REG_NS" "$@"; }

registry_stop() {
	if [ -n "${REG_PID:-}" ]; then
		kill "$REG_PID" 2>/dev/null || true
		wait "$REG_PID" 2>/dev/null || true
		REG_PID=
	fi
	if [ -n "${REG_OWN_NS:-}" ]; then
		ip netns del "$REG_NS" 2>/dev/null || true
		REG_OWN_NS=
	fi
}
