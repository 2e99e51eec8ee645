#!/usr/bin/env bash
# The oldest SQLite tokenbench supports (README: "Requirements"), built as a shared libsqlite3.so.0 that the
# standard sqlite3 module loads through LD_LIBRARY_PATH (tests/store/test_old_sqlite.py). Its source is the
# SQLite amalgamation that the PyPI sdist pysqlite-binary 0.5.1.3380300 ships; built once (about 30 s) and
# cached in $TOKENBENCH_CACHE (default $XDG_CACHE_HOME/tokenbench, else ~/.cache/tokenbench).
set -euo pipefail
VERSION=3.38.3
SDIST=pysqlite-binary==0.5.1.3380300
cache="${TOKENBENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tokenbench}"
out="$cache/sqlite-$VERSION"
[ -f "$out/libsqlite3.so.0" ] && exit 0
command -v gcc >/dev/null 2>&1 || { echo "old-sqlite: gcc not found (Debian: apt-get install gcc)" >&2; exit 1; }
work="$(mktemp -d "${TMPDIR:-/tmp}/tokenbench-sqlite.XXXXXX")"
trap 'rm -rf "$work"' EXIT
"${PY:-python3}" -m pip download -q --no-deps --no-binary :all: -d "$work" "$SDIST"
tar -xzf "$work"/pysqlite-binary-*.tar.gz -C "$work" --wildcards '*/src/sqlite3.c'
src="$(echo "$work"/pysqlite-binary-*/src/sqlite3.c)"
grep -q "define SQLITE_VERSION  *\"$VERSION\"" "$src" || { echo "old-sqlite: $src is not SQLite $VERSION" >&2; exit 1; }
mkdir -p "$out"
# the options Debian builds with that change what SQL does (JSON is built in from 3.38 on)
gcc -O1 -shared -fPIC -DSQLITE_THREADSAFE=1 -DSQLITE_ENABLE_COLUMN_METADATA -DSQLITE_MAX_VARIABLE_NUMBER=250000 \
    -o "$work/libsqlite3.so.0" "$src" -lpthread -ldl -lm
mv "$work/libsqlite3.so.0" "$out/libsqlite3.so.0"
echo "old-sqlite: built SQLite $VERSION in $out" >&2
