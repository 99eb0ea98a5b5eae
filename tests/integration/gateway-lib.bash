# gateway-lib.bash — a private lcd whose model gateway talks HTTPS to a
# model double in a test netns (doubles-lib.bash), verified with a CA of the
# test's own.  Load it after lcd-lib and doubles-lib.
#
#   gw_ca DIR                 a CA and a certificate for the doubles' service
#                             addresses (192.0.2.10, 2001:db8:d0b::10) in DIR
#                             (ca.pem, srv.pem, srv.key), and a second CA
#                             (other-ca.pem) that did not sign it
#   gw_up DOUBLE SCRIPT [JSON]  the double (anthropic-double.py or
#                             openai-double.py) in $DBL_NS over TLS with the
#                             turns in SCRIPT and its log in $W/req.jsonl, a
#                             private lcd whose lcd.json "gateway" points at it
#                             (JSON: more keys for "gateway"), and the secret
#                             $GW_SECRET (value $REAL_KEY)
#   gw_sandbox [ARGS…]        lcctl sandbox create --model-gateway
#                             PROVIDER:$GW_SECRET ARGS…; sets SB
#   ask SB BODY [CURL-ARGS]   POST BODY to the provider's main path from
#                             inside SB with the sandbox's own token and base
#                             URL; prints the answer, then the status line
#   gw_share_images           the private LCRUN_ROOT uses the host's image
#                             store (images, layers and their locks), so a
#                             test's lcd finds images built there (agent-cli)

gw_ca() {
	local d=$1
	mkdir -p "$d"
	[ -s "$d/srv.pem" ] && return 0
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/ca.key" -out "$d/ca.pem" \
		-days 2 -subj /CN=lcrun-test-ca 2>/dev/null || return 1
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/other-ca.key" \
		-out "$d/other-ca.pem" -days 2 -subj /CN=lcrun-other-ca 2>/dev/null || return 1
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/srv.key" -out "$d/srv.csr" \
		-subj /CN=model-double 2>/dev/null || return 1
	printf 'subjectAltName=IP:%s,IP:%s\n' "$DBL4" "$DBL6" >"$d/ext"
	openssl x509 -req -in "$d/srv.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial -out "$d/srv.pem" \
		-days 2 -extfile "$d/ext" 2>/dev/null
}

gw_up() { # DOUBLE SCRIPT [EXTRA-GATEWAY-JSON]
	local double=$1 script=$2 extra=${3:-{\}}
	GW_PROVIDER=anthropic GW_SECRET=ANTHROPIC_API_KEY
	if [ "$double" = openai-double.py ]; then GW_PROVIDER=openai GW_SECRET=OPENAI_API_KEY; fi
	dbl_netns_up
	dbl_start "$double" model --listen "$DBL4" --script "$script" --log "$W/req.jsonl" \
		--tls-cert "$GW_CA/srv.pem" --tls-key "$GW_CA/srv.key" || return 1
	jq -n --arg p "$GW_PROVIDER" --arg u "https://$DBL4:$DBL_PORT" --arg ca "$GW_CA/ca.pem" --argjson x "$extra" \
		'{gateway: ({upstreams: {($p): $u}, ca_file: $ca, idle_timeout: 3} + $x)}' >"$T/lcd.json"
	start_lcd || return 1
	printf '%s\n' "$REAL_KEY" | "$LCCTL" secret set "$GW_SECRET"
}

gw_sandbox() {
	SB=$("$LCCTL" sandbox create --model-gateway "$GW_PROVIDER:$GW_SECRET" "$@") || return 1
}

ask() { # SB BODY [CURL-ARGS]
	local path=/v1/messages key='-H "x-api-key: $ANTHROPIC_API_KEY"' base='$ANTHROPIC_BASE_URL'
	if [ "${GW_PROVIDER:-anthropic}" = openai ]; then
		path=/chat/completions key='-H "Authorization: Bearer $OPENAI_API_KEY"' base='$OPENAI_BASE_URL'
	fi
	"$LCCTL" sandbox exec -e "BODY=$2" "$1" -- sh -c \
		"curl -sS -N ${3:-} $key -H 'content-type: application/json' -H 'anthropic-version: 2023-06-01' --data-binary \"\$BODY\" \"$base$path\" -w '\n%{http_code}\n'"
}

gw_share_images() {
	local x
	mkdir -p -m 0700 "$LCRUN_ROOT"
	mkdir -p /var/lib/lcrun/images /var/lib/lcrun/layers
	for x in images layers .gc.lock .index.lock; do
		[ -e "/var/lib/lcrun/$x" ] || touch "/var/lib/lcrun/$x"
		ln -sfn "/var/lib/lcrun/$x" "$LCRUN_ROOT/$x"
	done
}

ledger() { # SQL WHERE clause: the ledger's rows as JSON lines
	lcd_sql_json "SELECT * FROM gateway_ledger WHERE $1 ORDER BY seq" | jq -c '.[]'
}
