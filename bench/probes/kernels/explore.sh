# exploratory: nvcc builds of planted.cu and what loading each gives
set -x
which nvcc; nvcc --version | tail -2
D=/tmp/planted; mkdir -p $D
nvcc -shared -Xcompiler -fPIC -gencode arch=compute_80,code=sm_80 -o $D/wrong.so planted.cu
nvcc -shared -Xcompiler -fPIC -gencode arch=compute_90,code=sm_90 -o $D/right.so planted.cu
nvcc -shared -Xcompiler -fPIC -gencode arch=compute_80,code=compute_80 -o $D/ptx80.so planted.cu
nvcc -shared -Xcompiler -fPIC -gencode arch=compute_100,code=sm_100 -o $D/sm100.so planted.cu
for f in wrong right ptx80 sm100; do
python3 - $D/$f.so <<'PY'
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1]); lib.planted_error_string.restype = ctypes.c_char_p
x = (ctypes.c_float * 4)(1, 2, 3, 4)
rc = lib.planted_add_one(x, 4)
print(sys.argv[1], rc, lib.planted_error_string(rc).decode(), list(x))
PY
done
cuobjdump --list-elf $D/wrong.so; cuobjdump --list-ptx $D/ptx80.so
