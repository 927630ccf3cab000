#!/usr/bin/env bash
# tests/module_harness.sh: build tests/module_harness.c (the standalone test of
# src/module.c) with its shared object in every configuration below, run it,
# and end with "N passed, N failed". Not part of tests/run.
#
#   tests/module_harness.sh [ITERATIONS] [CONFIG_WORD...]
#
# The shared object is built without sanitizers: the harness scans it with
# corrupt section headers, which makes module.c read arbitrary bytes of its
# loaded segments (bounds-checked against them), and ASan would flag the
# redzones of an instrumented library's globals there.
set -u
cd "$(dirname "$0")/.."
OUT=build/module_harness
ITER=${1:-4000}
shift || true
filters=("$@")
ELF32=/usr/lib32/libc.so.6
[ -f "$ELF32" ] || ELF32=
WARN="-std=c99 -Wall -Wextra -Werror"
X86_WHOLE="-fpatchable-function-entry=26,24 -falign-functions=16 -DHARNESS_WHOLE"
A64_WHOLE="-fpatchable-function-entry=9,8 -falign-functions=16 -DHARNESS_WHOLE"
QEMU="qemu-aarch64 -L /usr/aarch64-linux-gnu"
ASAN="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
A64CLANG="clang --target=aarch64-linux-gnu"

# name | harness compiler and flags | library compiler and flags | strip | runner
CONFIGS=(
  "gcc-pie|gcc $WARN -O2|gcc -O2 -fno-semantic-interposition|strip|"
  "gcc-nopie|gcc $WARN -O2 -fno-pie -no-pie|gcc -O2|strip|"
  "gcc-cf|gcc $WARN -O2 -fcf-protection|gcc -O2 -fcf-protection|strip|"
  "gcc-whole|gcc $WARN -O2 $X86_WHOLE|gcc -O2|strip|"
  "clang-pie|clang $WARN -O2 -fPIE -pie|clang -O2|strip|"
  "clang-nopie|clang $WARN -O2 -fno-pie -no-pie|clang -O2|strip|"
  "clang-cf|clang $WARN -O2 -fcf-protection|clang -O2 -fcf-protection|strip|"
  "clang-whole|clang $WARN -O2 $X86_WHOLE|clang -O2|strip|"
  "clang-lld|clang $WARN -O2 -fuse-ld=lld|clang -O2 -fuse-ld=lld|strip|"
  "clang-lld-nopie|clang $WARN -O2 -fno-pie -no-pie -fuse-ld=lld|clang -O2 -fuse-ld=lld|strip|"
  "gcc-gold|gcc $WARN -O2 -fuse-ld=gold|gcc -O2 -fuse-ld=gold|strip|"
  "gcc-gc-lto|gcc $WARN -O2 -flto -ffunction-sections -Wl,--gc-sections|gcc -O2 -flto -DHARNESS_LTO|strip|"
  "clang-gc-lto|clang $WARN -O2 -flto -ffunction-sections -Wl,--gc-sections -fuse-ld=lld|clang -O2 -flto -fuse-ld=lld -DHARNESS_LTO|strip|"
  "gcc-asan|gcc $WARN $ASAN|gcc -O2|strip|"
  "clang-asan|clang $WARN $ASAN|clang -O2|strip|"
  "tcc|tcc -Wall -Werror -g|gcc -O2|strip|"
  "aarch64-gcc|aarch64-linux-gnu-gcc $WARN -O2|aarch64-linux-gnu-gcc -O2 -fno-semantic-interposition|aarch64-linux-gnu-strip|$QEMU"
  "aarch64-gcc-nopie|aarch64-linux-gnu-gcc $WARN -O2 -fno-pie -no-pie|aarch64-linux-gnu-gcc -O2|aarch64-linux-gnu-strip|$QEMU"
  "aarch64-gcc-bti|aarch64-linux-gnu-gcc $WARN -O2 -mbranch-protection=standard|aarch64-linux-gnu-gcc -O2 -mbranch-protection=standard|aarch64-linux-gnu-strip|$QEMU"
  "aarch64-gcc-whole|aarch64-linux-gnu-gcc $WARN -O2 $A64_WHOLE|aarch64-linux-gnu-gcc -O2|aarch64-linux-gnu-strip|$QEMU"
  "aarch64-clang|$A64CLANG $WARN -O2|$A64CLANG -O2|aarch64-linux-gnu-strip|$QEMU"
  "aarch64-clang-nopie|$A64CLANG $WARN -O2 -fno-pie -no-pie|$A64CLANG -O2|aarch64-linux-gnu-strip|$QEMU"
  "aarch64-clang-whole|$A64CLANG $WARN -O2 $A64_WHOLE|$A64CLANG -O2|aarch64-linux-gnu-strip|$QEMU"
  "aarch64-clang-lld|$A64CLANG $WARN -O2 -fuse-ld=lld|$A64CLANG -O2 -fuse-ld=lld|aarch64-linux-gnu-strip|$QEMU"
)

passed=0 failed=0
for cfg in "${CONFIGS[@]}"; do
    IFS='|' read -r name cc libcc stripper run <<< "$cfg"
    skip=0
    for w in "${filters[@]+"${filters[@]}"}"; do case "$name" in *"$w"*) ;; *) skip=1 ;; esac; done
    [ "$skip" = 1 ] && continue
    dir="$OUT/$name"
    rm -rf "$dir"; mkdir -p "$dir"
    log="$dir/log"
    if $libcc -fPIC -shared -o "$dir/libmh.so" tests/module_harness_lib.c >"$log" 2>&1 &&
       $libcc -fPIC -shared -DHARNESS_OTHER_BUILD -o "$dir/libmh_other.so" tests/module_harness_lib.c >>"$log" 2>&1 &&
       $stripper --strip-all -o "$dir/libmh_stripped.so" "$dir/libmh.so" >>"$log" 2>&1 &&
       $cc -o "$dir/module_harness_$name" tests/module_harness.c -pthread >>"$log" 2>&1 &&
       $run "$dir/module_harness_$name" "$dir" "$ITER" $ELF32 >>"$log" 2>&1; then
        passed=$((passed + 1)); echo "PASS  $name"
    else
        failed=$((failed + 1)); echo "FAIL  $name  (log: $log)"
    fi
    sed 's/^/      | /' "$log" | grep -v '^      | *$' | head -40
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
