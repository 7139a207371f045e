#!/bin/sh
# Builds the debugger's libFuzzer targets with clang (not part of the CMake build or CI):
#   tests/debugger/fuzz/build_fuzzers.sh OUT_DIR
#   OUT_DIR/record_fuzz -max_total_time=600 OUT_DIR/corpus_record
#   OUT_DIR/index_fuzz  -max_total_time=600 OUT_DIR/corpus_index
# Needs clang, libprotobuf-dev, protobuf-compiler, nlohmann-json3-dev and libtorch's c10
# (strata::Error derives from c10::Error).
set -eu
out=${1:?usage: build_fuzzers.sh OUT_DIR}
root=$(cd "$(dirname "$0")/../../.." && pwd)
mkdir -p "$out/gen/debugger/proto" "$out/corpus_record" "$out/corpus_index"
protoc -I "$root/src/debugger/proto" --cpp_out="$out/gen/debugger/proto" "$root"/src/debugger/proto/*.proto
c10inc=$(dirname "$(find /usr/include /usr/local/include -path '*c10/util/Exception.h' 2>/dev/null | head -n1)")/../..
flags="-std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -I$root/src -I$root/include -I$out/gen -I$out/gen/debugger/proto -I$c10inc"
core="$root/src/core/rank_tag.cpp"
dbg="$root/src/debugger/crc32c.cpp $root/src/debugger/record.cpp $root/src/debugger/types.cpp
     $root/src/debugger/reductions.cpp $root/src/debugger/naming.cpp $root/src/debugger/event_codec.cpp
     $root/src/debugger/trial_files.cpp
     $out/gen/debugger/proto/smdebug_event.pb.cc $out/gen/debugger/proto/tensorboard_event.pb.cc"
for target in record_fuzz index_fuzz; do
  clang++ $flags -o "$out/$target" "$root/tests/debugger/fuzz/$target.cpp" $dbg $core -lprotobuf -lc10 -lpthread
done
echo "built $out/record_fuzz $out/index_fuzz"
