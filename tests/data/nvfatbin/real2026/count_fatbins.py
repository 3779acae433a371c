# Counts the fatbinaries in a file (found by magic, read by their headers) and those with
# an entry a device of compute capability ARGV[2] (90 for sm_90) can load by the driver's
# rule (cubin: same major, minor not above; PTX: not above; `a`: that SM only): an
# oracle independent of the crate for `doctor` on libraries whose fat binaries no wrapper
# registers. `python3 count_fatbins.py libcufft.so.12 90` -> `18227 8529`.
import struct,sys,re
f=open(sys.argv[1],'rb').read()
dev=int(sys.argv[2])
hits=[m.start() for m in re.finditer(b'\x50\xed\x55\xba\x01\x00\x10\x00',f)]
n=0; ok=0; end_prev=0
for p in hits:
    if p<end_prev: continue
    body=struct.unpack_from('<Q',f,p+8)[0]; end=p+16+body
    if end>len(f): continue
    q=p+16; ents=[]; good=True
    while q<end:
        kind,ev,ehs,ps=struct.unpack_from('<HHIQ',f,q)
        sm=struct.unpack_from('<I',f,q+0x1c)[0]; flags=struct.unpack_from('<Q',f,q+0x28)[0]
        if ehs<64 or q+ehs+ps>end: good=False;break
        ents.append((kind,sm,flags)); q+=ehs+ps
    if not good: continue
    n+=1; end_prev=end
    def loads(k,sm,fl):
        a=fl&0x100000; fam=fl&0x200000
        if k==2:
            if a: return sm==dev
            if fam: return sm//10==dev//10 and sm<=dev
            return sm//10==dev//10 and sm<=dev
        if k==1:
            if a: return sm==dev
            if fam: return sm//10==dev//10 and sm<=dev
            return sm<=dev
        return False
    if any(loads(*e) for e in ents): ok+=1
print(n,ok)
