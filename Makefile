# `make run`: set up, fetch the built-in and freely licensed models, serve. `make test`: set up, fetch built-ins, test.
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
export RAY_USAGE_STATS_ENABLED ?= 0

.PHONY: install models run test test-fast bench gpu-wheels clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

install: $(VENV)/.installed

models: install
	$(VENV)/bin/portrait models pull --builtin

# Single machine: keep Ray on 127.0.0.1 (not the machine's external address). Before serving, fetch the models whose
# licences allow any use (or from PORTRAIT_MODELS_MIRROR); without network that costs seconds and prints one line.
run: models
	-$(VENV)/bin/portrait models pull --default --best-effort
	mkdir -p buckets/in  # the folder route of configs/local.yaml (the runner refuses a missing input folder)
	RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 $(VENV)/bin/serve run configs/local.yaml

test: models
	$(PY) -m pytest -q -rs

test-fast: models
	$(PY) -m pytest -q -m "not slow"

# The renderer's packages the GPU image lacks, as wheels for its Python 3.12 (bench/gpu_check.sh installs .whl/).
GPU_WHEELS := diffusers==0.42.1 pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 \
	typing-inspection==0.4.5 importlib-metadata==10.2.0 lazy-importer==0.1.0
gpu-wheels:
	python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
		--platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl $(GPU_WHEELS)

clean:
	rm -rf $(VENV) build *.egg-info test-output
