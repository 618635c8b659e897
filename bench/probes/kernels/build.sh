#!/bin/bash
# Builds the planted libraries of the kernels probe's device check into DIR (default /tmp/planted):
#   wrong.so      SASS for sm_80 only: no image for a Hopper or Blackwell GPU
#   right.so      SASS for the GPU's own architecture (ARCH, default 90) and its PTX
#   ptx80.so      PTX for compute_80 only: the driver compiles it for a newer GPU (passes)
#   ptx-newer.so  the same PTX, uncompressed, with its ISA version raised to 9.9: PTX written by a
#                 toolkit newer than the driver (CUDA 13.0 writes .version 9.0)
D=${1:-/tmp/planted}; ARCH=${2:-90}; SRC=$(dirname "$0")/planted.cu
mkdir -p "$D"
nvcc -shared -Xcompiler -fPIC -gencode arch=compute_80,code=sm_80 -o "$D/wrong.so" "$SRC" &
nvcc -shared -Xcompiler -fPIC -gencode arch=compute_$ARCH,code=[sm_$ARCH,compute_$ARCH] -o "$D/right.so" "$SRC" &
nvcc -shared -Xcompiler -fPIC -gencode arch=compute_80,code=compute_80 -o "$D/ptx80.so" "$SRC" &
nvcc -shared -Xcompiler -fPIC -no-compress -gencode arch=compute_80,code=compute_80 -o "$D/ptx-plain.so" "$SRC" &
wait
python3 - "$D" <<'PY'
import sys
d = sys.argv[1]
data = open(f"{d}/ptx-plain.so", "rb").read()
assert data.count(b".version 9.0") == 1, "expected one PTX of ISA 9.0 (CUDA 13.0)"
open(f"{d}/ptx-newer.so", "wb").write(data.replace(b".version 9.0", b".version 9.9"))
PY
ls -la "$D"
