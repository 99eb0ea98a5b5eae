#!/bin/sh
# Every program is linked with full RELRO: a GNU_RELRO segment and every
# symbol bound at start-up (BIND_NOW), so that the GOT is read-only once
# the program runs, and so that a process forked from lcrun binds no
# symbol lazily (configure.ac, RELRO_LDFLAGS).
set -u
fail=0
for prog in lcrun lcrun-oci lcd lcctl orchestrator/workloads/lc-planner; do
	if ! readelf -lW "$prog" | grep -q 'GNU_RELRO'; then
		echo "relro.sh: $prog has no GNU_RELRO segment" >&2
		fail=1
	fi
	if ! readelf -dW "$prog" | grep -Eq '\(FLAGS\).*BIND_NOW|\(FLAGS_1\).*NOW'; then
		echo "relro.sh: $prog binds its symbols lazily (no BIND_NOW)" >&2
		fail=1
	fi
done
exit $fail
