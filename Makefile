# Loom: `make demo` and `make test` set up everything they need (root, Debian 12) and are idempotent.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
APT_PKGS := openvswitch-switch mininet iperf3 iputils-ping ethtool procps iproute2 etcd-server etcd-client openssl
APT_NORECOMMENDS := prometheus
WMEM := 16777216
RMEM := 4194304
OVS_CTL := /usr/share/openvswitch/scripts/ovs-ctl

.PHONY: setup apt ovs venv osken-venv faucet-venv test test-unit test-emulation lint demo clean-venv pki

setup: apt ovs venv

## Debian packages: installed only when missing.
apt:
	@missing=""; for p in $(APT_PKGS) $(APT_NORECOMMENDS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "setup: installing Debian packages:$$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; apt-get update -qq && \
	  apt-get install -y -qq $(APT_PKGS) >/dev/null && \
	  apt-get install -y -qq --no-install-recommends $(APT_NORECOMMENDS) >/dev/null; \
	else echo "setup: Debian packages present"; fi
	@# The Debian package enables a system Prometheus; the tests start their own on loopback.
	@systemctl disable --now prometheus >/dev/null 2>&1 || true
	@# Likewise etcd: a cluster's members are started by the demo and tests that need them.
	@systemctl disable --now etcd >/dev/null 2>&1 || true

## Open vSwitch, userspace datapath: raise socket buffers *before* ovs-vswitchd starts
## (its one shared send socket otherwise drops packets silently under congestion), and
## the default receive buffer, which each port's socket takes when a bridge port is added
## (small ones drop frames in arrival order, before any DSCP queue class can rank them).
ovs: apt
	@if [ "$$(sysctl -n net.core.rmem_default)" -lt $(RMEM) ]; then \
	  sysctl -qw net.core.rmem_default=$(RMEM); fi
	@cur=$$(sysctl -n net.core.wmem_default); \
	if [ "$$cur" -lt $(WMEM) ]; then \
	  sysctl -qw net.core.wmem_default=$(WMEM) net.core.wmem_max=$(WMEM) net.core.rmem_max=$(WMEM); \
	  if pgrep -x ovs-vswitchd >/dev/null; then echo "setup: restarting OVS with larger socket buffers"; \
	    $(OVS_CTL) stop >/dev/null 2>&1 || true; fi; \
	fi; \
	if ! ovs-vsctl --timeout=3 show >/dev/null 2>&1 || ! pgrep -x ovs-vswitchd >/dev/null; then \
	  echo "setup: starting Open vSwitch (userspace datapath)"; \
	  $(OVS_CTL) start --system-id=random >/dev/null 2>&1 || { echo "setup: ovs-ctl start failed" >&2; exit 1; }; \
	else echo "setup: Open vSwitch running"; fi

## Python: one venv on Debian's python3 (the only one that imports Mininet).
venv: $(VENV)/.installed

$(VENV)/.installed: requirements.txt setup.cfg controller/ofp/patch_ryu.py | apt
	@test -x $(PY) || /usr/bin/python3 -m venv --system-site-packages $(VENV)
	@echo "setup: installing pinned Python packages into $(VENV)"
	@$(PY) -m pip install -q --disable-pip-version-check 'setuptools==67.8.0' pbr wheel 2>&1 | grep -v "^WARNING: Location" || true
	@$(PY) -m pip install -q --disable-pip-version-check --no-build-isolation -r requirements.txt 2>&1 | grep -v "^WARNING: Location" || true
	@$(PY) -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps -e . 2>&1 | grep -v "^WARNING: Location" || true
	@$(PY) controller/ofp/patch_ryu.py
	@$(PY) -c "import ryu.app.wsgi, mininet.net, networkx, prometheus_client, yaml, pydantic, controller" \
	  || { echo "setup: the venv does not import its packages" >&2; exit 1; }
	@touch $@

## os-ken (OpenStack's maintained Ryu fork) in a venv of its own: the same app must run there.
OSKEN_VENV := .venv-osken
osken-venv: $(OSKEN_VENV)/.installed

$(OSKEN_VENV)/.installed: requirements-osken.txt | apt
	@test -x $(OSKEN_VENV)/bin/python || /usr/bin/python3 -m venv $(OSKEN_VENV)
	@echo "setup: installing os-ken into $(OSKEN_VENV)"
	@$(OSKEN_VENV)/bin/pip install -q --disable-pip-version-check -r requirements-osken.txt 2>&1 | grep -v "^WARNING: Location" || true
	@$(OSKEN_VENV)/bin/python -c "import os_ken, networkx, numpy, scipy.sparse.csgraph, yaml, pydantic, prometheus_client" \
	  || { echo "setup: the os-ken venv does not import its packages" >&2; exit 1; }
	@touch $@

## Faucet (the production OpenFlow controller: the `faucet` benchmark baseline) in a venv of
## its own: it pins its own os-ken and libraries. Unpatched; see requirements-faucet.txt.
FAUCET_VENV := .venv-faucet
faucet-venv: $(FAUCET_VENV)/.installed

$(FAUCET_VENV)/.installed: requirements-faucet.txt | apt
	@test -x $(FAUCET_VENV)/bin/python || /usr/bin/python3 -m venv $(FAUCET_VENV)
	@echo "setup: installing Faucet into $(FAUCET_VENV)"
	@$(FAUCET_VENV)/bin/pip install -q --disable-pip-version-check -r requirements-faucet.txt 2>&1 | grep -v "^WARNING: Location\|DEPRECATION: .* legacy 'setup.py install'" || true
	@$(FAUCET_VENV)/bin/python -c "import faucet.faucet, faucet.check_faucet_config, os_ken, eventlet" \
	  && test -x $(FAUCET_VENV)/bin/faucet -a -x $(FAUCET_VENV)/bin/osken-manager \
	  || { echo "setup: the Faucet venv does not import its packages" >&2; exit 1; }
	@touch $@

## PyTorch (CPU wheel) in the main venv: the collectives workload runs real gloo ranks
## inside the emulated hosts (mininet_scenarios/workloads/collectives/worker.py).
.PHONY: torch
torch: $(VENV)/.torch-installed

$(VENV)/.torch-installed: requirements-torch.txt $(VENV)/.installed
	@echo "setup: installing PyTorch (CPU) into $(VENV)"
	@$(PY) -m pip install -q --disable-pip-version-check -r requirements-torch.txt 2>&1 | grep -v "^WARNING: Location" || true
	@$(PY) -c "import torch.distributed as dist; assert dist.is_gloo_available()" \
	  || { echo "setup: torch with gloo does not import in $(VENV)" >&2; exit 1; }
	@touch $@

## The whole suite: the lint gate first, then the unit, fake-fabric, adapter, fuzz, lab and
## emulation layers (root, OVS).
test: setup osken-venv faucet-venv torch lint
	LOOM_REQUIRE_EMULATION=1 $(PY) -m pytest

test-unit: venv
	$(PY) -m pytest -m "not emulation"

## ruff (pyproject.toml), mypy strict over all code and tests, import contracts (setup.cfg).
lint: venv
	$(VENV)/bin/ruff check controller topologies mininet_scenarios tests
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

demo: setup torch
	$(PY) -m mininet_scenarios.demo $(ARGS)

## OpenFlow and etcd over TLS (docs/operator.md): a local CA, the controller's, the
## switches', etcd's and the REST API's keys and certificates in pki/ (kept if there; Python's standard
## library and openssl only).
pki: apt
	/usr/bin/python3 -m mininet_scenarios.harness.pki pki

## Three Loom instances on a three-member etcd (loopback) share a k=4 fat-tree; one dies
## under traffic, then etcd members do (~2 min); etcd over TLS with users (pki/), or
## ARGS=--plain-etcd.
.PHONY: cluster-demo
cluster-demo: setup torch
	flock /tmp/loom-emulation.lock $(PY) -m mininet_scenarios.demo.cluster $(ARGS)

clean-venv:
	rm -rf $(VENV) $(OSKEN_VENV)

## Benchmarks (docs/benchmarks.md §1 Fabric patterns, §3 Dragonfly): aggregate throughput of
## every mode divided by a non-blocking switch on the same traffic matrices; JSON + PNG into
## results/. Serialised by the lock with other emulations that may run at the same time
## (defaults: fat-tree ~35 min, dragonfly ~8).
.PHONY: bench-patterns bench-dragonfly
bench-patterns: setup faucet-venv
	flock /tmp/loom-emulation.lock $(PY) -m mininet_scenarios.bench.patterns

bench-dragonfly: setup
	flock /tmp/loom-emulation.lock $(PY) -m mininet_scenarios.bench.patterns --fabric dragonfly

## Equipped and plain fabrics side by side in one run (docs/benchmarks.md, "Plain and
## equipped fabrics"): the fat-tree patterns (~20 min) and the collectives, quick (~25 min).
.PHONY: bench-patterns-both bench-collectives-both
bench-patterns-both: setup
	flock /tmp/loom-emulation.lock $(PY) -m mininet_scenarios.bench.sidebyside patterns \
		--modes nonblocking,ecmp,loom --seeds 1 --seconds 20 --rate 4
bench-collectives-both: setup torch
	flock /tmp/loom-emulation.lock $(PY) -m mininet_scenarios.bench.sidebyside collectives \
		--quick --modes ecmp,unregistered,loom

## What new flows cost the core (docs/benchmarks.md §9), placement at the first packet on and
## off side by side; the core alone, no emulation.
## Cluster benchmark (docs/benchmarks.md §6): ten SIGKILLs of the instance mastering a
## stream's switches, and the control-plane load of 1, 2 and 3 instances (~12 min).
.PHONY: bench-cluster
bench-cluster: setup torch
	flock /tmp/loom-emulation.lock $(PY) -m mininet_scenarios.bench.cluster $(ARGS)

.PHONY: bench-newflows
bench-newflows: venv
	$(PY) -m mininet_scenarios.bench.newflows

## The same patterns on a plain fabric: no class tree, the kernel's queues, Loom told nothing.
.PHONY: bench-patterns-plain
bench-patterns-plain: setup faucet-venv
	flock /tmp/loom-emulation.lock $(PY) -m mininet_scenarios.bench.patterns --plain

## Gray links: one fat-tree link at a quarter of its rate, Loom told nothing (~10 min).
.PHONY: bench-graylink
bench-graylink: setup
	flock /tmp/loom-emulation.lock $(PY) -m mininet_scenarios.bench.graylink $(ARGS)

## Collectives benchmark (docs/benchmarks.md §2 Collectives): real gloo all-reduce and
## all-to-all on a k=4 fat-tree with DSCP queue classes, ecmp vs loom and no-qos vs loom
## side by side; JSON + PNG into results/collectives.
.PHONY: bench-collectives
bench-collectives: setup torch
	flock /tmp/loom-emulation.lock $(PY) -m mininet_scenarios.bench.collectives

## Collectives at cluster scale (docs/benchmarks.md §2, "Many jobs"): 4 jobs x 4 ranks and
## 2 x 8 scattered across pods, each in its own tenant, every job's busbw in the mix / alone,
## and two long jobs while two others arrive and leave; ecmp vs loom; JSON + PNG into
## results/collectives-jobs. ARGS='--quick' (~14 min), '--plain', '--seeds 2'.
.PHONY: bench-collectives-jobs
bench-collectives-jobs: setup torch
	flock /tmp/loom-emulation.lock $(PY) -m mininet_scenarios.bench.collectives_jobs $(ARGS)

## Rails (docs/benchmarks.md §15): gloo ranks bound to the NICs of 4 servers x 4 NICs on a
## rail-optimized fabric; ECMP and Loom with the launcher's order, Loom with its rail-aware
## order, one switch as the reference (~25 min; ARGS=--quick ~2 min).
.PHONY: bench-rails
bench-rails: setup torch
	flock /tmp/loom-emulation.lock $(PY) -m mininet_scenarios.bench.rails $(ARGS)

## Jobs that must share links, by weight (docs/benchmarks.md §2): iperf3 on every ring hop of
## two jobs on a 2:1 oversubscribed leaf-spine, unregistered, equal weights, 3:1 (~4 min)
bench-weights: setup
	flock /tmp/loom-emulation.lock $(PY) -m mininet_scenarios.bench.weights $(ARGS)

## Failover benchmark (docs/benchmarks.md §4 Failover): traffic gap at link cuts with fast
## failover on and off, controller reroute latency after PortStatus, controller restart
## and packet-in flood on a k=4 fat-tree; JSON + PNG into results/failover.
.PHONY: bench-failover
bench-failover: setup
	flock /tmp/loom-emulation.lock $(PY) -m mininet_scenarios.bench.failover

## Headless benchmark (docs/benchmarks.md §11 Headless operation): traffic between hosts that
## talked before while no controller answers ARP (restart, SIGSTOP, CPU hog, 5 min without a
## controller, etcd quorum lost), Linux's default and shortened neighbour timers side by side
## on a plain k=4 fat-tree; JSON + PNG into results/headless (~10 min; ARGS='--quick' ~5).
.PHONY: bench-headless
bench-headless: setup
	flock /tmp/loom-emulation.lock $(PY) -m mininet_scenarios.bench.headless $(ARGS)

## Fuzz benchmark (docs/benchmarks.md §5 Hostile input): >= 10,000 generated policies, REST
## requests and frames each against the real loader, API and decoders; per-kind failures,
## slowest case and p50/p99 times; JSON + PNG into results/fuzz. No emulation, no root.
.PHONY: bench-fuzz
bench-fuzz: venv
	$(PY) -m tests.fuzz.bench $(ARGS)

## Scale benchmark (docs/benchmarks.md §7 Controller scale): the core alone on generated
## fat-trees (k=4..48) and dragonflies (up to 1,024 routers) over a fast fake wire: bring-up,
## full recompute, link and switch failures, host moves, jobs, rules per switch, control
## traffic, memory; JSON + PNG into results/scale. No emulation, no root; each size stops
## at --budget (600 s of core or wall time). ARGS='--quick' runs k=4 and k=8 only.
.PHONY: bench-scale
bench-scale: venv
	$(PY) -m mininet_scenarios.bench.scale $(ARGS)

## Real-switch scale benchmark: Loom as a user starts it against k-ary fat-trees of real Open
## vSwitch bridges (a private ovs-vswitchd with dummy datapaths, control plane only, shuffled
## datapath ids): bring-up, hosts learned by ARP, rules per switch, CPU and memory, REST
## latency, ofproto/trace of sampled host pairs before and after a link cut; JSON + PNG into
## results/real-switches. ARGS='--k 8 16 24', '--consecutive-ids', '--profile' (py-spy).
.PHONY: bench-real
bench-real: venv
	flock /tmp/loom-emulation.lock $(PY) -m mininet_scenarios.bench.real_switches $(ARGS)

## What-if prediction (docs/benchmarks.md §8): Loom's core on a generated fabric with a job
## mix; every link's load and every job's busbw (max-min fair model) under ecmp and loom,
## from paths traced through the rules the core installed; JSON + PNG into results/whatif.
## No emulation, no root. ARGS='fat_tree:k=16 --jobs 16x64:allreduce', or '--check-k4'.
.PHONY: whatif
whatif: venv
	$(PY) -m mininet_scenarios.bench.whatif $(ARGS)

## TE at size, with traffic: Hedera's patterns on k=16/32/48 fat-trees, nonblocking, hashed
## ECMP and Loom's real core side by side, flow-level (max-min fair) over the paths the core
## installs, its counters fed the modelled rates; JSON + PNG into results/te-model. No root;
## minutes of CPU at size, so under the lock. ARGS='--fabrics fat_tree:k=32 --seconds 20',
## or '--check-k4 --measured results/patterns-keep-placed/results.json'.
.PHONY: bench-te-model
bench-te-model: venv
	flock /tmp/loom-emulation.lock $(PY) -m mininet_scenarios.bench.te_model $(ARGS)
