import ctypes, time
from tokenizers import normalizers as N
u=ctypes.CDLL('libutf8proc.so.2')
for f in ['utf8proc_NFC','utf8proc_NFD','utf8proc_NFKC','utf8proc_NFKD']:
    getattr(u,f).restype=ctypes.c_void_p
libc=ctypes.CDLL('libc.so.6'); libc.free.argtypes=[ctypes.c_void_p]
def U(f,s):
    p=getattr(u,f)(s.encode()); r=ctypes.string_at(p).decode(); libc.free(p); return r
hf={k:getattr(N,k)() for k in ['NFC','NFD','NFKC','NFKD']}
t=time.time()
bad=[]
for cp in range(0x80,0x110000):
    if 0xD800<=cp<=0xDFFF: continue
    c=chr(cp)
    tests=[c, '\u0345'+c, c+'\u0345', 'a'+c]
    diff=False
    for k in ['NFC','NFKD']:
        s='\u0345'.join(tests)+'\u0345'+c
        if hf[k].normalize_str(s)!=U('utf8proc_'+k,s): diff=True;break
    if diff: bad.append(cp)
print(time.time()-t, len(bad))
rs=[]
for cp in bad:
    if rs and rs[-1][1]==cp-1: rs[-1][1]=cp
    else: rs.append([cp,cp])
print(len(rs)); print(rs)
