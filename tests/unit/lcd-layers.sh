#!/bin/sh
# lcd's calls run one way, main.c -> http/ -> core/ -> lcd.c -> model/
# (docs/hacking.md, "lcd's layers"): contrib/lcd-layers lists every call
# or #include against that order, and every circle of files across
# folders, and exits 1 when there is one.
set -u
py=/usr/bin/python3
[ -x "$py" ] || py=python3
exec "$py" "${srcdir:-.}/contrib/lcd-layers" "${srcdir:-.}"
