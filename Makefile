# The tests in tiers, and the matrix of Spark lines and Pythons they run on. `bash infra/test.sh`
# installs the default line's venv (idempotent), then runs `make -k -j2 -O test`; a run on another
# venv installs that venv at its start.
#
#   make fast                                        # the fast tier: a few minutes
#   make -k -j2 -O test                              # everything CI runs, two runs at a time
#   make test PYTEST_ARGS="tests/test_safety.py -x"  # only those, on the default line
#   make test PYTEST_ARGS=tests SPARK_LINES=3.5      # the whole suite on the 3.5 line
#   make test PYTHON_VERSIONS=                       # no smoke tests on the other Pythons
#
# What runs where is chosen by the tests' markers (pyproject.toml lists them):
#   fast            the default line (.venv) without the slow tests: the planner, the gates, the
#                   ledger, and real vacuums on the local S3
#   default-line    the default line's whole suite, the standalone-cluster and fault tests too; with
#                   it run the benchmarks' own tests (testpaths) and the docs build (tests/test_docs.py)
#   default-main    the default line's suite but the own_jvms tests
#   own-jvms        only the default line's own_jvms tests: the long ones with JVMs of their own (the
#                   standalone cluster, jobs SIGKILLed mid-write and S3 faults, fetch-jars' archive,
#                   spark-submit's jobs, the installed command's runs, a local cluster's executors
#                   given the package)
#   line-<LINE>     the line-sensitive tests on each other supported Spark line (.venv-spark<LINE>,
#                   .venv-spark3.5-py3.10 for 3.5 when 3.10 is smoked and on the machine):
#                   Delta's log reading, VACUUM planner and RETAIN, table features, S3A and its AWS
#                   SDK, the jars and package a cluster gets; on 3.5 with Spark's generated
#                   code, which tables of more than 10,000 objects run on (GENERATED_CODE_LINES);
#                   on 3.5 with Python 3.10 and its smoke tests too (RIDER_line-3.5)
#   java-25         the default line's line-sensitive tests on Java 25 (25.0.3 on), where the machine
#                   has one (skipped otherwise), but the one_java ones (the cross-writer matrix, about
#                   half the run's time: what only it covers, each writer's table features, is read
#                   by Delta's code, taken to be the same on any Java; S3A, the batch delete, the
#                   ledger and the installed command run on Java 25 in the other line-sensitive
#                   tests); with Python 3.13 and its smoke tests too (RIDER_java-25); every other
#                   run takes the first Java found that its line runs on (JAVA_HOME first:
#                   infra/env.sh)
#   smoke           the parsers and the installed command end to end on the other Pythons
#                   (.venv-py<VERSION>, default line), each in a run of its own; in `test` a
#                   smoked Python rides on another run where it can (below)
#   docs            the docs site builds with mkdocs --strict
#   benchmarks-tests  the benchmarks' own tests (no Spark, seconds)
#
# Under -j2, `test` runs two at a time: the runs wait in one queue, longest first, and each starts
# when a run before it ends. The default line's suite is split in two (default-main, own-jvms) so
# that the two slots are busy about as long: on 2 cores two runs side by side get more done than one.
# A run that fails does not stop the runs after it; `test` ends with one line per run (passed or
# failed, minutes) and fails if any run failed.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
DRY_RUN := $(findstring n,$(firstword -$(MAKEFLAGS)))

ENV := source infra/env.sh
DEFAULT_SPARK_LINE := $(shell $(ENV) && echo $$DEFAULT_SPARK_LINE)
DEFAULT_PYTHON_VERSION := $(shell $(ENV) && echo $$DEFAULT_PYTHON_VERSION)
SPARK_LINES_SUPPORTED := $(shell $(ENV) && echo $$SPARK_LINES_SUPPORTED)
PYTHON_VERSIONS_SUPPORTED := $(shell $(ENV) && echo $$PYTHON_VERSIONS_SUPPORTED)
PYTHON_VERSIONS_SMOKED := $(shell $(ENV) && echo $$PYTHON_VERSIONS_SMOKED)
OTHER_LINES := $(filter-out $(DEFAULT_SPARK_LINE),$(SPARK_LINES_SUPPORTED))
OTHER_PYTHONS := $(filter-out $(DEFAULT_PYTHON_VERSION),$(PYTHON_VERSIONS_SUPPORTED))

# What `test` runs. PYTEST_ARGS, when given, replace the matrix: those arguments on each line of
# SPARK_LINES (the default line unless set). Otherwise SPARK_LINES and PYTHON_VERSIONS narrow it.
PYTEST_ARGS ?=
ifeq ($(strip $(PYTEST_ARGS)),)
SPARK_LINES ?= $(SPARK_LINES_SUPPORTED)
else
SPARK_LINES ?= $(DEFAULT_SPARK_LINE)
endif
PYTHON_VERSIONS ?= $(PYTHON_VERSIONS_SMOKED)

# run_tests LABEL LINE PYTHON_VERSION PYTEST_ARGS... (infra/env.sh): one pytest run in that venv
RUN := $(ENV) && run_tests
run_default = $(RUN) "$(1)" $(DEFAULT_SPARK_LINE) $(DEFAULT_PYTHON_VERSION)

.PHONY: help test matrix fast default-line default-main own-jvms java-25 smoke docs benchmarks-tests

help:
	@echo "targets: fast default-line default-main own-jvms $(addprefix line-,$(OTHER_LINES)) java-25 smoke docs benchmarks-tests test"
	@echo "test is everything CI runs (make -k -j2 -O test: two runs at a time); the Makefile's first lines say what each runs"

fast:
	@$(call run_default,fast (Spark $(DEFAULT_SPARK_LINE), not slow)) -m "not slow" $(or_continue)

default-line:
	@$(call run_default,Spark $(DEFAULT_SPARK_LINE)) $(or_continue)

default-main:
	@$(call run_default,Spark $(DEFAULT_SPARK_LINE) (most tests)) -m "not own_jvms" $(or_continue)

own-jvms:
	@$(call run_default,Spark $(DEFAULT_SPARK_LINE) (cluster, faults, spark-submit, fetch-jars, installed command)) -m own_jvms $(or_continue)

# A smoked Python rides on a run the matrix makes anyway: its smoke tests then cost no Spark session
# and no run of the installed command's vacuum of their own (the smoke tests' two minutes, most of a
# smoke run's). The oldest smoked Python rides on the oldest other Spark line's run, the newest on
# the Java 25 run (where the machine has no Java 25, that run is the smoke tests alone, on the
# default Java). Any other (3.12 in PYTHON_VERSIONS="3.10 3.12 3.13"), or one whose run is left
# out of the matrix (SPARK_LINES), gets a smoke run of its own.
RIDER_line-3.5 := 3.10
RIDER_java-25 := 3.13
# the riders smoked in this matrix that this machine has: the run a missing one would ride on runs
# on the default Python (infra/test.sh leaves a Python the machine lacks out of PYTHON_VERSIONS and
# says so; plain make queues its smoke run, which fails saying why)
RIDERS_FOUND := $(shell $(ENV) && for v in $(filter $(RIDER_line-3.5) $(RIDER_java-25),$(PYTHON_VERSIONS)); do \
	find_python $$v >/dev/null 2>&1 && echo $$v; done)
# rider RUN: the Python RUN runs on: its rider when that Python is smoked and here, else the default one
rider = $(or $(filter $(RIDER_$(1)),$(RIDERS_FOUND)),$(DEFAULT_PYTHON_VERSION))
ridden = $(filter-out $(DEFAULT_PYTHON_VERSION),$(call rider,$(1)))
on_rider = $(if $(call ridden,$(1)),$(comma) Python $(call rider,$(1)))
and_smoke = $(if $(call ridden,$(1)), and smoke)
or_smoke = $(if $(call ridden,$(1)), or smoke)

# A table of at most 10,000 objects is planned on Spark's interpreted evaluation, a bigger one on
# generated code; the suite's tables are small. On these lines the line-sensitive tests run with
# generated code (INVENTORY_VACUUM_TEST_CODEGEN, tests/conftest.py), on the others interpreted.
GENERATED_CODE_LINES := 3.5
comma := ,
define line_target
.PHONY: line-$(1)
line-$(1):
	@$$(if $$(filter $(1),$$(GENERATED_CODE_LINES)),export INVENTORY_VACUUM_TEST_CODEGEN=generated &&) \
	$$(RUN) "Spark $(1)$$(call on_rider,line-$(1)) (line-sensitive$$(call and_smoke,line-$(1))$$(if $$(filter $(1),$$(GENERATED_CODE_LINES)),$$(comma) generated code))" \
	$(1) $$(call rider,line-$(1)) -m "line_sensitive$$(call or_smoke,line-$(1))" $$(or_continue)
endef
$(foreach line,$(OTHER_LINES),$(eval $(call line_target,$(line))))

define smoke_target
.PHONY: smoke-$(1)
smoke-$(1):
	@$$(RUN) "Python $(1) (smoke)" $$(DEFAULT_SPARK_LINE) $(1) -m smoke $$(or_continue)
endef
$(foreach version,$(OTHER_PYTHONS),$(eval $(call smoke_target,$(version))))

smoke: $(addprefix smoke-,$(filter-out $(DEFAULT_PYTHON_VERSION),$(PYTHON_VERSIONS)))

# Spark 4.2 runs on Java 17, 21 and 25 (25.0.3 on: Spark's docs deprecate the builds before it for a
# G1 data-corruption bug), and a run of many tables is faster on 25 (docs/configuration.md): the
# default line's line-sensitive tests run on it too, but the one_java ones, where the machine has one;
# the other runs take the first Java found that their line runs on (infra/env.sh's ensure_java).
JAVA_25_LEAST := 25.0.3
JAVA_25_TESTS := line-sensitive but not one_java
JAVA_25_LABEL := Spark $(DEFAULT_SPARK_LINE) on Java 25$(call on_rider,java-25) ($(JAVA_25_TESTS)$(if $(call ridden,java-25),$(comma) and smoke))
java-25:
	@if home="$$($(ENV) && find_java_home 25 $(JAVA_25_LEAST))"; then \
	  export JAVA_HOME="$$home" INVENTORY_VACUUM_JAVA_GIVEN="$$home" && $(RUN) "$(JAVA_25_LABEL)" \
	  $(DEFAULT_SPARK_LINE) $(call rider,java-25) -m "(line_sensitive and not one_java)$(call or_smoke,java-25)" $(or_continue); \
	else \
	  line="$$(printf '%-36s %s' "Spark $(DEFAULT_SPARK_LINE) on Java 25 ($(JAVA_25_TESTS)):" "skipped (no Java $(JAVA_25_LEAST) or later on this machine)")"; \
	  echo "$$line"; if [ -n "$${TEST_SUMMARY:-}" ]; then echo "$$line" >> "$$TEST_SUMMARY"; fi; \
	  $(if $(call ridden,java-25),$(RUN) "Python $(call rider,java-25) (smoke)" $(DEFAULT_SPARK_LINE) $(call rider,java-25) -m smoke $(or_continue);) \
	fi

# PYTEST_ARGS on one line (the shell reads them from the environment: they may hold quoted words)
define pytest_target
.PHONY: pytest-$(1)
pytest-$(1):
	@eval "set -- $$$$PYTEST_ARGS" && $$(RUN) "Spark $(1): $$$$*" $(1) $$(DEFAULT_PYTHON_VERSION) "$$$$@" $$(or_continue)
endef
$(foreach line,$(SPARK_LINES_SUPPORTED),$(eval $(call pytest_target,$(line))))

docs:
	@site="$$(mktemp -d "$${TMPDIR:-/tmp}/inventory-vacuum-site.XXXXXX")" && status=0 && \
	NO_MKDOCS_2_WARNING=1 .venv/bin/python -m mkdocs build --strict --site-dir "$$site" || status=$$?; \
	rm -rf "$$site"; exit $$status

benchmarks-tests:
	@$(call run_default,benchmarks' own tests) benchmarks/test_benchmarks.py

# the smoked Pythons that ride on a run of this matrix
RIDING := $(foreach run,$(addprefix line-,$(filter-out $(DEFAULT_SPARK_LINE),$(SPARK_LINES))) \
	$(if $(filter $(DEFAULT_SPARK_LINE),$(SPARK_LINES)),java-25),$(call ridden,$(run)))

# The runs `test` makes, in the order they start: longest first, so that under -j2 the longest run
# has the others beside it, one after another, and the short runs fill in at the end.
ifeq ($(strip $(PYTEST_ARGS)),)
QUEUE := $(if $(filter $(DEFAULT_SPARK_LINE),$(SPARK_LINES)),default-main own-jvms) \
	$(addprefix line-,$(filter-out $(DEFAULT_SPARK_LINE),$(SPARK_LINES))) \
	$(if $(filter $(DEFAULT_SPARK_LINE),$(SPARK_LINES)),java-25) \
	$(addprefix smoke-,$(filter-out $(DEFAULT_PYTHON_VERSION) $(RIDING),$(PYTHON_VERSIONS)))
else
QUEUE := $(addprefix pytest-,$(SPARK_LINES))
endif

matrix: $(QUEUE)
	@:

ifneq ($(filter matrix,$(MAKECMDGOALS)),)
# in the matrix a failed run lets the runs after it start; each run's outcome is in the summary
or_continue := || true
endif

test:
	@summary="$$(mktemp "$${TMPDIR:-/tmp}/inventory-vacuum-tests.XXXXXX")" && status=0 && \
	TEST_SUMMARY="$$summary" $(MAKE) --no-print-directory matrix || status=$$?; \
	if [ -n "$(DRY_RUN)" ]; then :; elif [ ! -s "$$summary" ]; then \
	  echo "nothing ran: no Spark line in SPARK_LINES ($(SPARK_LINES_SUPPORTED)) and no other Python in PYTHON_VERSIONS"; status=2; \
	else echo "=== the runs:"; cat "$$summary"; if grep -q FAILED "$$summary"; then status=1; fi; fi; \
	rm -f "$$summary"; exit $$status
