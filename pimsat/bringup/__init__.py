"""FPGA bring-up (issue 17): bundles a bring-up engineer loads into an HDL simulator or a board.

images.py   the hex formats of the bundle ($readmemh images, command-log and result lines)
golden.py   the golden results of one program: a replay of the channel streams' data effects,
            reconciled bit for bit with the simulator's own run
fit.py      whether a hardware description fits the RTL model of the prototype (rtl/)
bundle.py   writing a bundle (atomically), its manifest and JSON Schema, checking a bundle
rtl.py      running a bundle's channels in Icarus Verilog and comparing with the golden files
"""
