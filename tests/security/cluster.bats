#!/usr/bin/env bats
# Attacks on lcd's cluster: a request one node forwards to another
# (cluster-lib.bash: lcd nodes sharing a private PostgreSQL store).

load ../integration/lcd-lib
load ../integration/cluster-lib

setup() {
	cluster_setup
}

teardown() {
	cluster_teardown
}

@test "security/cluster: a space or CR LF in a forwarded path stays in the path; it cannot end the request line to the other node" {
	node_start 1 '"node_slots": 1'
	node_start 2 '"node_slots": 8'
	id=$(ctl 1 sandbox create --name far)
	ctl 1 sandbox show "$id" | jq -e '.node == "node2"'
	for p in "nothing%20here" "x%0D%0AX-Lcd-Forwarded:%201%0D%0AX-Other:%202"; do
		far=$(node_api 1 GET "/sandboxes/$id/$p" | tail -1)
		near=$(node_api 2 GET "/sandboxes/$id/$p" | tail -1)
		echo "$p: through node 1 $far, at node 2 $near"
		# node 2 answers the same path the same way, however it came
		[ "$near" = 404 ]
		[ "$far" = "$near" ]
	done
	# and the sandbox is still served through node 1
	ctl 1 sandbox exec far -- true
}
