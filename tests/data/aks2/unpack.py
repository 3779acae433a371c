# Unpacks an AOTriton `.aks2` archive by the layout AOTriton's writer gives it
# (ROCm/aotriton `v2python/aks2.py`): "AKS2", then u32 total uncompressed size, u32 number
# of kernels, u32 directory size (little-endian), then one xz stream of the directory
# (per kernel: u32 shared memory size, u32 block threads, u32 offset, u32 image size,
# u32 file name length with its NUL, the name and a NUL) followed by the code objects
# (offsets counted from the end of the directory). Prints per kernel: sha256, size,
# shared memory, block threads, name. Python's own lzma is the decoder.
import hashlib, lzma, struct, sys
data = open(sys.argv[1], 'rb').read()
assert data[:4] == b'AKS2'
total, count, dsize = struct.unpack_from('<III', data, 4)
body = lzma.decompress(data[16:], format=lzma.FORMAT_XZ)
assert len(body) == total, (len(body), total)
at = 0
for _ in range(count):
    shm, threads, off, size, nlen = struct.unpack_from('<IIIII', body, at)
    name = body[at + 20: at + 20 + nlen - 1].decode()
    at += 20 + nlen
    image = body[dsize + off: dsize + off + size]
    print(hashlib.sha256(image).hexdigest(), size, shm, threads, name)
assert at == dsize
