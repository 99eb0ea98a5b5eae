#!/bin/sh
# No file of runtime/lib calls back into one that calls it
# (docs/hacking.md, "liblcrun's files"): contrib/lib-circles lists every
# circle of calls between its files and exits 1 when there is one.
set -u
py=/usr/bin/python3
[ -x "$py" ] || py=python3
exec "$py" "${srcdir:-.}/contrib/lib-circles" "${srcdir:-.}"
