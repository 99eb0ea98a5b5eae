#!/usr/bin/env bats
# lcd on several hosts, played on this one: three nodes (cluster-lib.bash)
# sharing one private PostgreSQL store, the app in
# tests/fixtures/cluster/app.json.  Needs root and PostgreSQL's server.

FIXTURES="$BATS_TEST_DIRNAME/../fixtures/cluster"

load lcd-lib
load cluster-lib
load registry-lib

setup() {
	cluster_setup
}

teardown() {
	registry_stop
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
	# a task's record names the node that ran it: its log is there
	run ctl 1 run farm:hello '{"n": 1}'
	[ "$status" -eq 0 ]
	id=$(ctl 1 task list --json | jq -r '.[0].id')
	node=$(ctl 2 task show "$id" | jq -r 'select(.state == "succeeded") | .node')
	[[ "$node" == node[12] ]]
	[ -s "$T/n${node#node}/root/lcd/logs/$id.log" ]
	ctl 1 task list --json | jq -e --arg n "$node" '.[0].node == $n'
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

# running tasks of FN in the whole cluster
running() { lcd_sql "SELECT count(*) FROM tasks WHERE function = '$1' AND state = 'running'"; }

release_one() { # a running gated task: its go file, on the node that runs it
	local row id node
	row=$(lcd_sql "SELECT id, node FROM tasks WHERE function = 'gated' AND state = 'running' ORDER BY started_at LIMIT 1")
	[ -n "$row" ] || return 1
	id=${row%%|*} node=${row##*|}
	touch "$T/n${node#node}/root/lcd/tasks/$id/go"
	echo "$id"
}

@test "cluster: spawns through all three nodes; a function's concurrency holds across the cluster; a deploy reaches every node" {
	for i in 1 2 3; do node_start "$i" '"node_slots": 2'; done
	ctl 1 deploy "$FIXTURES/app.json"
	# the other nodes follow the deploy (told at once, else at their next beat)
	for i in 2 3; do
		for _ in $(seq 100); do ctl "$i" app show farm >/dev/null 2>&1 && break; sleep 0.1; done
		ctl "$i" app show farm >/dev/null
	done
	# 12 tasks, 4 through each node; concurrency 3 in all, though the
	# three nodes have room for 6
	for i in 1 2 3; do
		for k in 1 2 3 4; do ctl "$i" run -d farm:gated "{\"n\": \"$i.$k\"}" >/dev/null; done
	done
	[ "$(lcd_sql "SELECT count(*) FROM tasks WHERE function = 'gated'")" -eq 12 ]
	for _ in $(seq 100); do [ "$(running gated)" -eq 3 ] && break; sleep 0.1; done
	nodes_seen=""
	done_n=0
	while [ "$done_n" -lt 12 ]; do
		r=$(running gated)
		[ "$r" -le 3 ]
		nodes_seen+=" $(lcd_sql "SELECT DISTINCT node FROM tasks WHERE function = 'gated' AND state = 'running'" | tr '\n' ' ')"
		# no node runs more than its 2 slots
		[ -z "$(lcd_sql "SELECT node FROM tasks WHERE state = 'running' GROUP BY node HAVING count(*) > 2")" ]
		id=$(release_one) || { sleep 0.2; continue; }
		wait_task 1 "$id" succeeded
		done_n=$((done_n + 1))
	done
	# none lost, none twice: 12 succeeded, each once
	[ "$(lcd_sql "SELECT count(*) FROM tasks WHERE function = 'gated' AND state = 'succeeded' AND attempts = 1")" -eq 12 ]
	# the work went to more than one node (each has room for 2 of the 3)
	[ "$(echo "$nodes_seen" | tr ' ' '\n' | sort -u | grep -c node)" -ge 2 ]
	# every node answers for every task
	id=$(ctl 3 task list --json | jq -r '.[0].id')
	for i in 1 2 3; do ctl "$i" task show "$id" | jq -e '.state == "succeeded"'; done
}

@test "cluster: a sandbox made on node 2 is used through node 1: exec, a stream, files, a session, snapshot, fork; a task's log and cancel through any node" {
	# node 1 has less room: a create through it is placed on node 2
	node_start 1 '"node_slots": 1'
	node_start 2 '"node_slots": 8'
	id=$(ctl 1 sandbox create --name far)
	ctl 1 sandbox show "$id" | jq -e '.node == "node2" and .state == "running"'
	# it is node 2's: its runtime has it, node 1's does not
	env $(node_env 2) "$LCRUN" inspect "$id" >/dev/null
	run env $(node_env 1) "$LCRUN" inspect "$id"
	[ "$status" -ne 0 ]
	# exec, by id and by name, through node 1
	run ctl 1 sandbox exec far -- sh -c 'echo one; echo two >&2; exit 3'
	[ "$status" -eq 3 ]
	[ "$output" = "one
two" ]
	# a stream stays a stream: its first line is here while the command
	# still waits (for a file a second exec makes)
	curl -sN --unix-socket "$T/n1/lcd.sock" -X POST -H 'Content-Type: application/json' \
		--data-binary '{"cmd": "echo first; while [ ! -e /tmp/go ]; do sleep 0.1; done; echo second"}' \
		"http://lcd/v1/sandboxes/$id/exec?stream=1" >"$T/stream" &
	curl_pid=$!
	for _ in $(seq 200); do grep -q first "$T/stream" && break; sleep 0.1; done
	grep -q '"stdout": *"first' "$T/stream"
	if grep -q exit_code "$T/stream"; then false; fi
	ctl 1 sandbox exec "$id" -- touch /tmp/go
	wait "$curl_pid"
	tail -1 "$T/stream" | jq -e '.exit_code == 0'
	grep -q second "$T/stream"
	# files both ways (a tar stream through node 1)
	head -c 3000000 /dev/urandom >"$T/blob"
	ctl 1 sandbox cp "$T/blob" "$id:/tmp/blob"
	ctl 1 sandbox cp "$id:/tmp/blob" "$T/back"
	cmp "$T/blob" "$T/back"
	# a session keeps its shell on node 2
	s=$(node_api 1 POST "/sandboxes/$id/sessions" '{}' | head -1 | jq -r .id)
	node_api 1 POST "/sandboxes/$id/sessions/$s/run" '{"cmd": "cd /tmp && export X=kept"}' | head -1 | jq -e '.exit_code == 0'
	node_api 1 POST "/sandboxes/$id/sessions/$s/run" '{"cmd": "echo $PWD $X"}' | head -1 | jq -e '.stdout == "/tmp kept\n"'
	# the listing through node 1 shows node 2's view
	ctl 1 sandbox ls --json | jq -e --arg id "$id" '.[] | select(.id == $id) | .node == "node2" and .state == "running"'
	# snapshot and fork through node 1: made on node 2
	ctl 1 sandbox exec "$id" -- sh -c 'echo kept > /root/mark'
	ctl 1 sandbox snapshot "$id" cluster-snap
	env $(node_env 2) "$LCRUN" image inspect cluster-snap >/dev/null
	forks=$(ctl 1 sandbox fork "$id" 2 --json | jq -r '.[]')
	[ "$(echo "$forks" | wc -l)" -eq 2 ]
	for f in $forks; do
		ctl 1 sandbox show "$f" | jq -e '.node == "node2"'
		[ "$(ctl 1 sandbox exec "$f" -- cat /root/mark)" = kept ]
	done
	# removed through node 1: gone from node 2
	ctl 1 sandbox rm "$id" $forks
	run env $(node_env 2) "$LCRUN" inspect "$id"
	[ "$status" -ne 0 ]
	[ "$(lcd_sql "SELECT count(*) FROM sandboxes")" -eq 0 ]

	# a task's log and its cancel, through the node that does not run it
	ctl 1 deploy "$FIXTURES/app.json"
	t=$(ctl 1 run -d farm:long)
	wait_task 1 "$t" running
	runs=$(ctl 1 task show "$t" | jq -r .node)
	other=$([ "$runs" = node1 ] && echo 2 || echo 1)
	for _ in $(seq 100); do ctl "$other" task logs "$t" | grep -q started && break; sleep 0.1; done
	ctl "$other" task logs "$t" | grep -q started
	ctl "$other" task cancel "$t"
	wait_task "$other" "$t" cancelled
}

@test "cluster: images between nodes through a registry: a fork made on node 2 is pulled by node 3 for a create placed there" {
	command -v skopeo >/dev/null || skip "no skopeo (the Debian package)"
	registry_start "$CL_NS" "$T/registry"
	reg='"registry": "127.0.0.1:5000/lcrun"'
	node_start 1 "\"node_slots\": 1, $reg"
	node_start 2 "\"node_slots\": 3, $reg"
	# placed on node 2: it has the most room
	id=$(ctl 1 sandbox create)
	[ "$(ctl 1 sandbox show "$id" | jq -r .node)" = node2 ]
	ctl 1 sandbox exec "$id" -- sh -c 'echo from-node2 > /root/mark'
	# fork it through node 1: made on node 2, its image pushed
	out=$(node_api 1 POST "/sandboxes/$id/fork" '{"n": 2}' | head -1)
	echo "$out"
	image=$(echo "$out" | jq -r .image)
	digest=$(echo "$out" | jq -r .digest)
	for f in $(echo "$out" | jq -r '.ids[]'); do ctl 1 sandbox show "$f" | jq -e '.node == "node2"'; done
	grep -q "image $image: pushed to 127.0.0.1:5000/lcrun:" "$T/n2/lcd.log"
	reg_ns skopeo inspect --tls-verify=false "docker://127.0.0.1:5000/lcrun@$digest" | jq -e --arg d "$digest" '.Digest == $d'
	# node 2 is full now (a sandbox and two forks in its 3 slots); node 3,
	# which joins now, has the most room: a create of the fork's image goes
	# there, and node 3 pulls it, by its digest
	node_start 3 "\"node_slots\": 4, $reg"
	run env $(node_env 3) "$LCRUN" image inspect "$image"
	[ "$status" -eq 120 ]
	c=$(ctl 1 sandbox create --image "$image")
	ctl 1 sandbox show "$c" | jq -e '.node == "node3"'
	[ "$(env $(node_env 3) "$LCRUN" image inspect "$image" | jq -r .digest)" = "$digest" ]
	grep -q "image $image: pulled from 127.0.0.1:5000/lcrun@$digest" "$T/n3/lcd.log"
	[ "$(ctl 1 sandbox exec "$c" -- cat /root/mark)" = from-node2 ]
	# a second create there: the image is there, nothing pulled again
	c2=$(ctl 3 sandbox create --image "$image")
	[ "$(grep -c "image $image: pulled" "$T/n3/lcd.log")" -eq 1 ]
	ctl 1 sandbox rm "$c" "$c2" "$id" $(echo "$out" | jq -r '.ids[]')
}

@test "cluster: node 2 killed with kill -9 mid-task: its tasks fail with node_lost or run again elsewhere, its sandboxes are lost, another node leads" {
	# node 2 first: it leads, and runs what is spawned before the others join
	node_start 2 '"node_slots": 6'
	for _ in $(seq 100); do grep -q "node node2: leads now" "$T/n2/lcd.log" && break; sleep 0.1; done
	grep -q "node node2: leads now" "$T/n2/lcd.log"
	ctl 2 deploy "$FIXTURES/app.json"
	l1=$(ctl 2 run -d farm:long); l2=$(ctl 2 run -d farm:long)
	s1=$(ctl 2 run -d farm:survivor); s2=$(ctl 2 run -d farm:survivor)
	for t in $l1 $l2 $s1 $s2; do wait_task 2 "$t" running; done
	sb=$(ctl 2 sandbox create)
	node_start 1 '"node_slots": 4'
	node_start 3 '"node_slots": 4'
	for t in $l1 $l2 $s1 $s2; do ctl 1 task show "$t" | jq -e '.node == "node2"'; done
	node_kill 2
	# another node leads at once (the leader's lock went with node 2's connection)
	for _ in $(seq 100); do grep -q "leads now" "$T/n1/lcd.log" "$T/n3/lcd.log" && break; sleep 0.1; done
	[ "$(cat "$T/n1/lcd.log" "$T/n3/lcd.log" | grep -c "leads now")" -eq 1 ]
	# silent for 30 s: judged dead
	for _ in $(seq 600); do [ "$(ctl 1 task show "$l1" | jq -r .state)" = failed ] && break; sleep 0.1; done
	for t in $l1 $l2; do ctl 3 task show "$t" | jq -e '.state == "failed" and (.error | startswith("node_lost: node node2"))'; done
	# retry_on_node_loss: queued again, and running on a live node
	for t in $s1 $s2; do
		wait_task 1 "$t" running 30
		ctl 1 task show "$t" | jq -e '.node != "node2" and .attempts == 2 and (.error | startswith("node_lost"))'
	done
	ctl 1 sandbox show "$sb" | jq -e '.state == "lost" and .node == "node2"'
	ctl 1 node ls --json | jq -e '.[] | select(.name == "node2") | .state == "dead" and .free == 0'
	# node 2 comes back: its sandbox is live again, the old attempts' sandboxes are killed
	node_start 2 '"node_slots": 6'
	ctl 1 sandbox show "$sb" | jq -e '.state == "running" and .node == "node2"'
	[ "$(grep -c "killed: this node was judged dead while it ran" "$T/n2/lcd.log")" -eq 4 ]
	[ -z "$(pgrep -f '^sleep 319$')" ]
	[ "$(pgrep -fc '^sleep 320$')" -eq 2 ]
	for t in $s1 $s2; do ctl 2 task cancel "$t"; done
	ctl 1 sandbox rm "$sb"
}

@test "cluster: the database restarted mid-run: the nodes reconnect; nothing lost, nothing run twice" {
	for i in 1 2 3; do node_start "$i" '"node_slots": 2'; done
	ctl 1 deploy "$FIXTURES/app.json"
	for _ in $(seq 100); do ctl 3 app show farm >/dev/null 2>&1 && break; sleep 0.1; done
	ids=""
	for i in 1 2 3; do for k in 1 2; do ids+=" $(ctl "$i" run -d farm:gated "{\"n\": \"$i.$k\"}")"; done; done
	for _ in $(seq 100); do [ "$(running gated)" -eq 3 ] && break; sleep 0.1; done
	[ "$(running gated)" -eq 3 ]
	# restart PostgreSQL (-m fast: every session ends) while 3 run and 3 wait
	"$BATS_TEST_DIRNAME/../pg-cluster" restart "$LCD_PG_DIR"
	# the running ones end while the nodes find the store again
	for _ in 1 2 3; do release_one >/dev/null || true; done
	for i in 1 2 3; do for _ in $(seq 100); do ctl "$i" status >/dev/null 2>&1 && ctl "$i" task list --json >/dev/null 2>&1 && break; sleep 0.2; done; done
	# more through every node after it
	for i in 1 2 3; do ids+=" $(ctl "$i" run -d farm:gated "{\"n\": \"after.$i\"}")"; done
	done_n=0
	for _ in $(seq 600); do
		[ "$(lcd_sql "SELECT count(*) FROM tasks WHERE function = 'gated' AND state = 'succeeded'")" -eq 9 ] && break
		release_one >/dev/null || sleep 0.2
	done
	# none lost, none twice: nine spawned, nine succeeded, each on its first attempt
	[ "$(lcd_sql "SELECT count(*) FROM tasks WHERE function = 'gated'")" -eq 9 ]
	[ "$(lcd_sql "SELECT count(*) FROM tasks WHERE function = 'gated' AND state = 'succeeded' AND attempts = 1")" -eq 9 ]
	for t in $ids; do ctl 2 task show "$t" | jq -e '.state == "succeeded"'; done
	ctl 1 node ls --json | jq -e 'length == 3 and all(.[]; .state == "up")'
	grep -q "listening again" "$T/n1/lcd.log"
}

@test "cluster: one delivery sent to two nodes' webhook listeners at once spawns one task; another is taken by either" {
	command -v openssl >/dev/null || skip "needs openssl"
	lcdfix="$BATS_TEST_DIRNAME/../fixtures/lcd"
	for i in 1 2; do node_start "$i" "\"webhook_listen\": \"10.77.0.$i:8080\""; done
	printf 'whsec-%s' "$RANDOM$RANDOM" >"$T/hook.secret"
	ctl 1 secret set HOOK_SECRET <"$T/hook.secret"
	ctl 1 deploy "$lcdfix/webhook-app.json"
	for _ in $(seq 100); do ctl 2 app show hooks >/dev/null 2>&1 && break; sleep 0.1; done
	deliver() { # NODE ID FILE: POST as GitHub does; prints the status
		local sig
		sig="sha256=$(openssl dgst -sha256 -hmac "$(cat "$T/hook.secret")" "$3" | sed 's/.*= //')"
		nsenter --net="/run/netns/$CL_NS" curl -s --max-time 15 -o /dev/null -w '%{http_code}\n' -X POST \
			-H 'Content-Type: application/json' -H 'X-GitHub-Event: issues' -H "X-GitHub-Delivery: $2" \
			-H "X-Hub-Signature-256: $sig" --data-binary "@$3" "http://10.77.0.$1:8080/hooks/hooks/github"
	}
	id=$(cat /proc/sys/kernel/random/uuid)
	pids=()
	for k in $(seq 8); do
		for i in 1 2; do
			deliver "$i" "$id" "$lcdfix/webhook-issues-labeled.json" >"$T/st.$i.$k" &
			pids+=($!)
		done
	done
	wait "${pids[@]}"
	cat "$T"/st.*
	[ "$(cat "$T"/st.* | grep -c '^202$')" -eq 1 ]
	[ "$(cat "$T"/st.* | grep -c '^200$')" -eq 15 ]
	[ "$(lcd_sql "SELECT count(*) FROM tasks WHERE app = 'hooks'")" -eq 1 ]
	task=$(lcd_sql "SELECT id FROM tasks WHERE app = 'hooks'")
	wait_task 2 "$task" succeeded
	ctl 1 task show "$task" | jq -e --arg d "$id" '.result.delivery == $d'
	# each node takes a new delivery: one task each
	jq '. + {variant: 1}' "$lcdfix/webhook-issues-labeled.json" >"$T/v1.json"
	jq '. + {variant: 2}' "$lcdfix/webhook-issues-labeled.json" >"$T/v2.json"
	[ "$(deliver 1 "$id-1" "$T/v1.json")" = 202 ]
	[ "$(deliver 2 "$id-2" "$T/v2.json")" = 202 ]
	[ "$(lcd_sql "SELECT count(*) FROM tasks WHERE app = 'hooks'")" -eq 3 ]
	# and a redelivery of either, to the other node, is a duplicate
	[ "$(deliver 2 "$id-1" "$T/v1.json")" = 200 ]
	[ "$(lcd_sql "SELECT count(*) FROM tasks WHERE app = 'hooks'")" -eq 3 ]
}
