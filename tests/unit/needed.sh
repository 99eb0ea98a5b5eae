#!/bin/sh
# No program may need libarchive or its compression libraries at start-up:
# liblcrun loads libarchive.so.13 when archive code first runs
# (runtime/lib/archivelib.h).  Direct needs (DT_NEEDED) of every program,
# and everything lcrun and lcrun-oci map at start (lcd and lcctl map libz
# through libcurl).
set -u
banned='^(libarchive|libacl|liblzma|libzstd|liblz4|libbz2|libz)\.so'
fail=0
for prog in lcrun lcrun-oci lcd lcctl; do
	needed=$(readelf -d "$prog" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p')
	if ! echo "$needed" | grep -q '^libc\.so\.'; then
		echo "needed.sh: cannot read the dynamic section of $prog" >&2
		fail=1
		continue
	fi
	bad=$(echo "$needed" | grep -E "$banned")
	if [ -n "$bad" ]; then
		echo "needed.sh: $prog is linked with" $bad >&2
		fail=1
	fi
done
for prog in lcrun lcrun-oci; do
	bad=$(ldd "./$prog" | awk '{print $1}' | grep -E "$banned")
	if [ -n "$bad" ]; then
		echo "needed.sh: $prog maps at start-up" $bad >&2
		fail=1
	fi
done
exit $fail
