#!/usr/bin/env bats
# lcd on several hosts, played on this one: three nodes (cluster-lib.bash)
# sharing one private PostgreSQL store, the app in
# tests/fixtures/cluster/app.json.  Needs root and PostgreSQL's server.

FIXTURES="$BATS_TEST_DIRNAME/../fixtures/cluster"

load lcd-lib
load cluster-lib

setup() {
	cluster_setup
}

teardown() {
	cluster_teardown
}

@test "cluster: nodes register and beat; node ls shows each with its room; a task's record names the node that ran it" {
	node_start 1 '"node_slots": 5'
	node_start 2
	ctl 1 deploy "$FIXTURES/app.json"
	run ctl 2 node ls --json
	[ "$status" -eq 0 ]
	echo "$output"
	echo "$output" | jq -e 'length == 2 and ([.[].name] == ["node1", "node2"]) and all(.[]; .state == "up")'
	cores=$(nproc)
	echo "$output" | jq -e --argjson c "$cores" '.[0] | .cores == $c and .memory > 0 and .slots == 5 and .free == 5 and
		.address == "10.77.0.1:7070" and (.images | type == "array")'
	echo "$output" | jq -e --argjson c "$cores" '.[1].slots == 16 * $c'
	# the text table says the same
	ctl 1 node ls | grep -E '^node2 +up +10\.77\.0\.2:7070 '
	# a task run through node 1 names it
	run ctl 1 run farm:hello '{"n": 1}'
	[ "$status" -eq 0 ]
	id=$(ctl 1 task list --json | jq -r '.[0].id')
	ctl 2 task show "$id" | jq -e '.node == "node1" and .state == "succeeded"'
	ctl 1 task list --json | jq -e '.[0].node == "node1"'
	# heartbeats move on
	b1=$(ctl 1 node ls --json | jq '.[1].heartbeat')
	sleep 6
	b2=$(ctl 1 node ls --json | jq '.[1].heartbeat')
	[ "$b2" -gt "$b1" ]
	# a clean stop says so; a second lcd calling itself node1 elsewhere is refused
	node_stop 2
	ctl 1 node ls --json | jq -e '.[1].state == "stopped" and .[1].free == 0'
	mkdir -p "$T/other"
	printf '{"database": "%s", "secret_key_file": "%s", "node_name": "node1"}\n' "$LCD_DATABASE" "$T/lcd.key" >"$T/other/lcd.json"
	run env LCRUN_ROOT="$T/other/root" LCRUN_STATE_DIR="$T/other/state" "$LCD" --socket "$T/other/lcd.sock" --config "$T/other/lcd.json"
	echo "$output"
	[ "$status" -eq 119 ]
	[[ "$output" == *"node node1 is up elsewhere"*"another node_name"* ]]
	# a key other than the cluster's: refused at start
	(umask 077 && openssl rand -hex 32 >"$T/other.key")
	printf '{"database": "%s", "secret_key_file": "%s", "node_name": "node9"}\n' "$LCD_DATABASE" "$T/other.key" >"$T/other/lcd.json"
	run env LCRUN_ROOT="$T/other/root" LCRUN_STATE_DIR="$T/other/state" "$LCD" --socket "$T/other/lcd.sock" --config "$T/other/lcd.json"
	[ "$status" -eq 121 ]
	[[ "$output" == *"same secret_key_file"* ]]
}

