# Two commands do all setup on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test install iverilog bench docs clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/pimsat demo

test: $(STAMP) iverilog
	$(BIN)/python -m pytest

# Icarus Verilog for the RTL tests (tests/bringup): installed when missing and this machine can
# (root or password-less sudo, apt-get); otherwise one line, and the RTL tests skip (fail under CI=true).
iverilog:
	@command -v iverilog >/dev/null && command -v vvp >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif sudo -n true 2>/dev/null; then SUDO="sudo -n"; else SUDO=none; fi; \
	  if [ "$$SUDO" != none ] && command -v apt-get >/dev/null; then \
	    $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iverilog >/dev/null 2>&1 || \
	    { $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iverilog >/dev/null; } || \
	    echo "make: could not install iverilog (apt-get install -y iverilog): the RTL tests will skip"; \
	  else echo "make: iverilog not found and not installable here (needs root and apt-get): the RTL tests will skip"; fi; }

bench: $(STAMP)
	$(BIN)/pimsat bench

docs: $(STAMP)
	$(BIN)/python -m hwmodel.isa_doc > docs/isa.md

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
