# golden: a small fixed stream
WRGB gb=0 count=8 src=0 offset=0
@10 ACT mask=0xFFFF row=3
WAIT id=1
@1234 MAC mask=0x5555 col=0 count=8 gb=0 acc=3
MAC mask=0xAAAA col=8 count=8 gb=0 acc=4
RDACC bank=1 acc=3 count=2 dst=1 offset=4096 stride=1
WR bank=15 col=31 count=1 src=2 offset=123456789 emask=0xFF
RD bank=2 col=0 count=32 dst=3 offset=1099511627775
PRE mask=0xFFFF
@3900 REF
SIG id=2
HOP op=7 chain=0 head0=0 heads=0 batch0=0 batches=0
EPI op=8 chain=0 head0=0 heads=0 batch0=0 batches=0
HMV op=9 row0=3584 rows=512 chain=0
HMV op=10 row0=0 rows=4096 chain=1
HOP op=11 chain=0 head0=0 heads=0 batch0=2 batches=2
