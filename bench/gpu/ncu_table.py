#!/usr/bin/env python3
"""Per-kernel table from an `ncu --print-summary per-kernel` log (profile_run.sh's ncu_kernels
step): kernel time per decoded token, launches per token, share.
    python3 bench/gpu/ncu_table.py ncu_kernels.log [TOKENS=3]"""
import re,sys
txt=open(sys.argv[1]).read(); ntok=int(sys.argv[2]) if len(sys.argv)>2 else 3
pat=re.compile(r'^  (\S+) \((\d+), (\d+), (\d+)\)x\((\d+), (\d+), (\d+)\), Device 0, CC 9.0, Invocations (\d+)\n(?:.*\n){4}\s+gpu__time_duration.sum\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)',re.M)
rows=[]
for m in pat.finditer(txt):
    name=m.group(1); grid="x".join(m.group(2,3,4)); blk=m.group(5); inv=int(m.group(8)); unit=m.group(9); avg=float(m.group(12))
    mult={'us':1,'ms':1000,'ns':0.001,'usecond':1,'msecond':1000}[unit]
    rows.append((avg*mult*inv/ntok, name, grid, blk, inv, avg*mult))
tot=sum(r[0] for r in rows)
print(f"total kernel time per token: {tot:.0f} us; launches per token: {sum(r[4] for r in rows)/ntok:.0f}")
print("| kernel | grid × block | launches/token | avg µs | µs/token | share |\n|---|---|---:|---:|---:|---:|")
for r in sorted(rows,reverse=True):
    print(f"| {r[1]} | {r[2]} × {r[3]} | {r[4]/ntok:.0f} | {r[5]:.2f} | {r[0]:.1f} | {100*r[0]/tot:.1f} % |")
