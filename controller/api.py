"""Loom's REST API as pure request handling: (method, path, query, body) -> (status, JSON).

The Ryu WSGI glue in ``controller/ofp/rest.py`` only forwards requests here, so the
API is tested without a web server. Changes go through the same core as switch events:
a handler returns the OpenFlow messages to send along with its response. Who may do
what is ``controller.access`` (with no token configured, anyone may do anything); every
change and every refused token is written to the audit trail (``controller.audit``).

Routes (all under /loom/v1):
  GET health · GET topology · GET routes?mac=MAC · GET flows
  GET jobs · POST jobs · GET jobs/NAME · DELETE jobs/NAME · POST jobs/NAME/renew
  GET jobs/NAME/order · GET order?hosts=IP,... · GET topology/{hosts,slurm-conf,slurm-yaml}
  GET policy · POST policy/reload · GET cluster
"""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from controller.access import (
    AccessTable,
    Caller,
    Denial,
    Right,
    digest_of,
    may_change,
    may_change_jobs,
    may_read,
    may_reload,
    not_own_host,
    unknown,
)
from controller.audit import AuditEvent, AuditTrail, action_of
from controller.cluster.etcd import StoreUnavailable
from controller.cluster.shared import NO_QUORUM, SharedState
from controller.conductor import Conductor
from controller.flows import FlowKey
from controller.jobspec import JobError, brief, parse_job, split_lease
from controller.model import Messages
from controller.policy.manager import PolicyManager
from controller.railorder import nic_places, rail_order
from controller.schedulers import HostMap, host_map, slurm_topology_conf, slurm_topology_yaml
from controller.servers import resolve_nic_refs
from controller.view import FabricView

Clock = Callable[[], float]
MAX_BODY_BYTES = 1024 * 1024  # a 4,096-rank job is ~70 KB of JSON
log = logging.getLogger("loom.api")


@dataclass
class Response:
    status: int
    body: Any
    messages: Messages = field(default_factory=dict)
    about: dict[str, str] = field(default_factory=dict)  # job, target_tenant, right: audit


def error(status: int, message: str, **extra: Any) -> Response:
    return Response(status, {"error": message, **extra})


def refused(denial: Denial, **about: str) -> Response:
    """A refusal for the caller's token: 401 or 403, naming the right it lacks."""
    if denial.tenant is not None:
        about["target_tenant"] = denial.tenant
    return Response(denial.status, denial.body(), about={**about, "right": denial.right})


class LoomApi:
    def __init__(
        self,
        fabric: Conductor,
        clock: Clock,
        token: str | None = None,
        policy: PolicyManager | None = None,
        shared: SharedState | None = None,
        cluster: Callable[[], dict[str, object]] | None = None,
        audit: AuditTrail | None = None,
    ) -> None:
        self.fabric = fabric  # for changes only; reads go through the view
        self.view = FabricView(fabric)
        self.clock = clock
        self.token = token
        self.policy = policy
        self.shared = shared  # a cluster's store: changes go there first
        self.cluster = cluster
        self.audit = audit or AuditTrail(clock)
        self._access: tuple[object, str, AccessTable] | None = None  # policy, admin, table

    def handle(
        self, method: str, path: str, query: Mapping[str, str], body: bytes = b"", auth: str = ""
    ) -> Response:
        """Answer one request. Whatever it holds, the answer is a 2xx or a 4xx that names
        what was wrong, and a refused request changes nothing."""
        caller = self.access().identify(auth)
        try:
            res = self._handle(method.upper(), path, query, body, caller)
        except StoreUnavailable as exc:
            log.error("%s %s refused: %s", brief(method), brief(path), exc)
            res = error(503, NO_QUORUM)
        except Exception:  # a bug must not take the API down: logged with its trace
            log.exception("%s %s: internal error", brief(method), brief(path))
            res = error(500, "internal error; the request changed nothing it had not finished")
        self._audit(caller, method.upper(), path, res)
        return res

    def access(self) -> AccessTable:
        """The tokens in force: the admin's (the cluster's when shared) and the policy's,
        rebuilt when either changes, so a reload swaps them all at once."""
        shared = self.shared.token_digest if self.shared is not None else ""
        admin = shared or (digest_of(self.token) if self.token else "")
        policy = self.fabric.inputs.tenants.policy
        if self._access is None or self._access[0] is not policy or self._access[1] != admin:
            self._access = (policy, admin, AccessTable.of(policy, admin))
        return self._access[2]

    def _audit(self, caller: Caller, method: str, path: str, res: Response) -> None:
        parts = [p for p in path.strip("/").split("/") if p]
        resource = parts[2] if parts[:2] == ["loom", "v1"] and len(parts) >= 3 else ""
        shape = None if len(parts) < 4 else ("*" if len(parts) == 4 else f"*/{parts[4]}")
        action = action_of(method, resource, shape)
        if action is None and "right" in res.about:  # a read refused for its token
            action = "read"
        if action is not None:
            self.audit.record(AuditEvent(caller, method, path, action, res.status, res.about))

    def _handle(
        self, method: str, path: str, query: Mapping[str, str], body: bytes, caller: Caller
    ) -> Response:
        denial = unknown(caller) or (may_change(caller) if method != "GET" else None)
        if denial is not None:
            return refused(denial)
        parts = [p for p in path.strip("/").split("/") if p]
        if parts[:2] != ["loom", "v1"] or not 3 <= len(parts) <= 5:
            return error(404, f"no such resource: {brief(path)}")
        if len(body) > MAX_BODY_BYTES:
            return error(413, f"body: larger than {MAX_BODY_BYTES} bytes", field="body")
        resource, item = parts[2], (parts[3] if len(parts) >= 4 else None)
        action = parts[4] if len(parts) == 5 else None
        name = str(item)
        route: dict[tuple[str, str, str | None], Callable[[], Response]] = {
            ("GET", "health", None): lambda: self.health(),
            ("GET", "topology", None): lambda: self.topology(caller),
            ("GET", "topology", "*"): lambda: self.export(name, caller),
            ("GET", "routes", None): lambda: self.host_routes(query, caller),
            ("GET", "flows", None): lambda: self.flows(caller),
            ("GET", "order", None): lambda: self.order(query.get("hosts", "").split(","), caller),
            ("GET", "jobs", None): lambda: self.list_jobs(caller),
            ("POST", "jobs", None): lambda: self.create_job(body, caller),
            ("GET", "jobs", "*"): lambda: self.show_job(name, caller),
            ("DELETE", "jobs", "*"): lambda: self.delete_job(name, caller),
            ("POST", "jobs", "*/renew"): lambda: self.renew_job(name, caller),
            ("GET", "jobs", "*/order"): lambda: self.job_order(name, caller),
            ("GET", "policy", None): lambda: self.show_policy(caller),
            ("POST", "policy", "*"): lambda: self.reload_policy(name, caller),
            ("GET", "cluster", None): lambda: self.show_cluster(caller),
        }
        shape = None if item is None else ("*" if action is None else f"*/{action}")
        handler = route.get((method, resource, shape))
        if handler is None:
            allowed = sorted({m for m, r, sh in route if r == resource and sh == shape})
            if allowed:
                return error(
                    405, f"{brief(method)} not allowed on {brief(path)}; use {', '.join(allowed)}"
                )
            return error(404, f"no such resource: {brief(path)}")
        denial = (
            None if resource == "health" or method != "GET" else may_read(caller, caller.tenant)
        )
        return refused(denial) if denial is not None else handler()

    def show_cluster(self, caller: Caller) -> Response:
        if denial := may_read(caller):
            return refused(denial)
        if self.cluster is None:
            return Response(200, {"mode": "embedded"})
        return Response(200, self.cluster())

    # -- fabric -------------------------------------------------------------------
    def health(self) -> Response:
        v = self.view
        return Response(
            200,
            {
                "switches": len(v.switches),
                "links": len(v.links),
                "hosts": len(v.hosts),
                "jobs": len(v.jobs),
                "elephants": len(v.elephants()),
            },
        )

    def topology(self, caller: Caller) -> Response:
        if denial := may_read(caller):
            return refused(denial)
        return Response(200, self.view.describe())

    def host_routes(self, query: Mapping[str, str], caller: Caller) -> Response:
        mac = query.get("mac", "").lower()
        host = self.view.hosts.get(mac)
        if caller.scope is not None and (host is None or host.tenant != caller.scope):
            return refused(not_own_host(caller, mac))  # the same, learned or not
        if host is None:
            return error(404, f"unknown host MAC {brief(mac)}; expected a learned host's MAC")
        hops = self.view.next_hops(host.dpid)
        return Response(
            200,
            {
                "host": {"mac": host.mac, "ip": host.ip, "dpid": host.dpid, "port": host.port},
                "next_hops": {str(dpid): list(ports) for dpid, ports in sorted(hops.items())},
            },
        )

    def flows(self, caller: Caller) -> Response:
        """Tracked flows, largest first: rate, elephant or not, the pinned path, and how
        long after its first packet it was last moved (how soon its placement held). A
        tenant's token sees the flows from or to its hosts, and no reroute counts."""
        v, now, scope = self.view, self.clock(), caller.scope
        peer = v.peers()
        name = v.switch_name
        out = []
        for flow in sorted(v.flows.values(), key=lambda x: (-x.rate_bps, x.key)):
            if scope is not None and scope not in _tenants_of(v, flow.key):
                continue
            path = v.pinned_path(flow.key)
            switches = [name(flow.ingress)] + [name(peer[h]) for h in path or () if h in peer]
            out.append(
                {
                    "flow": str(flow.key),
                    "mbps": round(flow.rate_bps / 1e6, 3),
                    "elephant": flow.elephant,
                    "ingress": name(flow.ingress),
                    "pinned": path is not None,
                    "path": switches if path is not None else None,
                    "ack_priority": v.ack_priority(flow.key),
                    "age_s": round(now - flow.first_seen, 3),
                    "last_moved_s": _since(v.last_moved(flow.key), flow.first_seen),
                }
            )
        reroutes = dict(v.reroutes) if scope is None else {}
        return Response(200, {"flows": out, "reroutes": reroutes})

    # -- jobs -----------------------------------------------------------------------
    def list_jobs(self, caller: Caller) -> Response:
        jobs, scope = self.view.jobs, caller.scope
        names = sorted(n for n in jobs if scope is None or jobs[n].spec.tenant == scope)
        return Response(200, {"jobs": [self._job(n) for n in names]})

    def show_job(self, name: str, caller: Caller) -> Response:
        return self._job_read(name, caller) or Response(200, self._job(name))

    def _job_read(self, name: str, caller: Caller) -> Response | None:
        """The refusal of a read of the job ``name`` (``None``: it may be read): 404 when
        there is none, and the same 404 when it is another tenant's (``_hidden``)."""
        if name not in self.view.jobs:
            return error(404, f"no job named {brief(name)}")
        if hidden := self._hidden(name, caller, Right.READ):
            return hidden
        if denial := may_read(caller, self.view.jobs[name].spec.tenant):
            return refused(denial, job=name)
        return None

    def _hidden(self, name: str, caller: Caller, right: Right) -> Response | None:
        """Another tenant's job asked for by a token confined to its own tenant: answered
        as a name no job has, word for word (as a read says it, or, for a change, as the
        job book does), so a tenant learns nothing of another's jobs, not even that one of
        that name exists; audited and counted as a refusal of ``right`` all the same."""
        job = self.view.jobs.get(name)
        if job is None or caller.scope is None or job.spec.tenant == caller.scope:
            return None
        said = f"no job named {brief(name)}"
        if right is Right.READ:
            res = error(404, said)
        else:
            unknown = JobError("name", said)
            res = error(404, str(unknown), field=unknown.field)
        res.about = {"job": name, "target_tenant": job.spec.tenant, "right": right.value}
        return res

    def _job_change(self, name: str, caller: Caller) -> Response | None:
        """A refusal when the caller may not change the job ``name`` (if it exists)."""
        if hidden := self._hidden(name, caller, Right.JOBS):
            return hidden
        job = self.view.jobs.get(name)
        denial = may_change_jobs(caller, job.spec.tenant) if job is not None else None
        return refused(denial, job=name) if denial is not None else None

    def create_job(self, body: bytes, caller: Caller) -> Response:
        try:
            raw = read_json(body)
            data, lease = split_lease(raw)
            data, body = self._nic_refs(data, raw, body)
            spec = parse_job(data)
            if denial := may_change_jobs(caller, spec.tenant):
                return refused(denial, job=spec.name)
            if self.shared is not None:  # checked, then stored, then applied here
                self.fabric.sources.jobs.check(spec, self.fabric.inputs.tenants)
                self.shared.publish_job(spec.name, body, lease)
                lease = None  # the store's lease expires it, on every instance at once
            try:
                messages = self.fabric.create_job(self.clock(), spec, lease)
            except JobError:
                if self.shared is not None:  # refused here after all: not for the others
                    self.shared.withdraw_job(spec.name)
                raise
        except JobError as exc:
            return error(409 if exc.conflict else 400, str(exc), field=exc.field)
        about = {"job": spec.name, "target_tenant": spec.tenant}
        return Response(201, self._job(spec.name), messages, about)

    def _nic_refs(self, data: Any, raw: Any, body: bytes) -> tuple[Any, bytes]:
        """``"server:NIC"`` hosts resolved to IPs here, before the job is validated (the
        job's validation has no policy to look servers up in); the body stored for a
        cluster's other instances then holds the IPs, so they need not resolve again."""
        if not isinstance(data, Mapping) or "hosts" not in data:
            return data, body
        topo = self.fabric.topo
        hosts = resolve_nic_refs(data["hosts"], self.view.servers, topo.hosts, topo.host_by_ip)
        if hosts == data["hosts"]:
            return data, body
        return {**data, "hosts": hosts}, json.dumps({**raw, "hosts": hosts}).encode()

    def renew_job(self, name: str, caller: Caller) -> Response:
        """A launcher's heartbeat: the job lives another lease."""
        if denied := self._job_change(name, caller):
            return denied
        try:
            if self.shared is not None and name in self.view.jobs:
                lease = self.shared.renew_job(name)
                return Response(200, {"name": name, "lease_seconds": lease, "expires_in": lease})
            job = self.fabric.sources.jobs.renew(name, self.clock())
        except JobError as exc:
            return error(409 if exc.conflict else 404, str(exc), field=exc.field)
        assert job.lease is not None and job.expires is not None
        expires_in = round(job.expires - self.clock(), 3)
        return Response(200, {"name": name, "lease_seconds": job.lease, "expires_in": expires_in})

    def _job(self, name: str) -> dict[str, Any]:
        body = self.view.describe_job(name)
        job = self.view.jobs[name]
        if job.expires is not None:
            body["lease_seconds"] = job.lease
            body["expires_in"] = round(job.expires - self.clock(), 3)
        elif self.shared is not None and name in self.shared.leases:
            body["lease_seconds"] = self.shared.leases[name]
        return body

    # -- advice for launchers and schedulers ------------------------------------------
    def order(self, hosts: list[str], caller: Caller) -> Response:
        """The topology-aware rank order of ``hosts`` (a ring in it crosses each leaf
        uplink once per direction); hosts not learned yet come last, as given. When they
        are NICs of declared servers whose rails hold, each server's ranks are together
        and every hop between servers stays on one rail (``controller.railorder``)."""
        ips = [h.strip() for h in hosts if h.strip()]
        if not ips:
            return error(
                400, "hosts: expected ?hosts=IP,IP,... (host IPv4 addresses)", field="hosts"
            )
        bad = [ip for ip in ips if not _is_ipv4(ip)]
        if bad:
            return error(400, f"hosts: {brief(bad[0])} is not an IPv4 address", field="hosts")
        scope = caller.scope
        foreign = [ip for ip in ips if scope is not None and self.view.tenant_of_ip(ip) != scope]
        if foreign:
            return refused(not_own_host(caller, foreign[0]))
        return Response(200, rail_order(self.fabric.topo, ips, self.view.servers).as_json())

    def job_order(self, name: str, caller: Caller) -> Response:
        if not_read := self._job_read(name, caller):
            return not_read
        response = self.order(list(self.view.jobs[name].spec.hosts), caller)
        response.body["name"] = name
        return response

    def export(self, kind: str, caller: Caller) -> Response:
        """What Loom learned, as schedulers read it (node names are host IPs here;
        ``loom-export`` maps them to names). A tenant's token reads its own hosts, and
        the leaves and blocks they are under, alone."""
        topo = self.fabric.topo
        hm = host_map(topo, self.view.switch_name, nic_places(self.view.servers, topo))
        if kind == "hosts":
            scope = caller.scope
            return Response(
                200, hm.as_dict() if scope is None else _own_hosts(hm, self.view, scope)
            )
        if denial := may_read(caller):
            return refused(denial)
        renderers = {"slurm-conf": slurm_topology_conf, "slurm-yaml": slurm_topology_yaml}
        render = renderers.get(kind)
        if render is None:
            known = ", ".join(["hosts", *renderers])
            return error(404, f"no such export: topology/{brief(kind)}; expected one of {known}")
        return Response(200, {"format": kind, "text": render(hm, str)})

    # -- policy ---------------------------------------------------------------------
    def show_policy(self, caller: Caller) -> Response:
        if denial := may_read(caller):
            return refused(denial)
        if self.policy is None:
            return Response(200, {"file": None, "enforcing": False, "tenants": []})
        return Response(200, self.policy.describe())

    def reload_policy(self, action: str, caller: Caller) -> Response:
        if action != "reload":
            return error(404, f"no such action: policy/{brief(action)}; use policy/reload")
        if denial := may_reload(caller):
            return refused(denial)
        if self.policy is None or self.policy.status.path is None:
            return error(409, "no policy file configured (set LOOM_POLICY)")
        if self.shared is not None:
            self.shared.client.get(self.shared.prefix)  # refused now if the store is down
        messages = self.policy.reload(self.clock())
        body = self.policy.describe()
        if not self.policy.status.ok:
            return Response(
                422, {"error": "policy rejected; the running policy stays in force", **body}
            )
        if self.shared is not None:
            self.shared.publish_policy()
        return Response(200, body, messages)

    def delete_job(self, name: str, caller: Caller) -> Response:
        if denied := self._job_change(name, caller):
            return denied
        try:
            if self.shared is not None and name in self.view.jobs:
                self.shared.withdraw_job(name)
            messages = self.fabric.delete_job(name)
        except JobError as exc:
            return error(404, str(exc), field=exc.field)
        return Response(200, {"deleted": name}, messages, {"job": name})


def _is_ipv4(text: str) -> bool:
    try:
        return ipaddress.ip_address(text).version == 4
    except ValueError:
        return False


def read_json(body: bytes) -> Any:
    """A request body as JSON, strictly: UTF-8, no NaN or Infinity, no key given twice,
    nesting within Python's limits; anything else is a ``JobError`` on ``body``."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JobError("body", f"not UTF-8: byte offset {exc.start}") from None
    try:
        return json.loads(text or "null", object_pairs_hook=_no_duplicates, parse_constant=_no_nan)
    except JobError:
        raise
    except RecursionError:
        raise JobError("body", "JSON nested too deeply") from None
    except ValueError as exc:
        raise JobError("body", f"not JSON ({brief(str(exc), 120)})") from None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise JobError(key[:64], "key given twice")
        out[key] = value
    return out


def _no_nan(name: str) -> Any:
    raise JobError("body", f"{name} is not a JSON number")


def _since(when: float | None, start: float) -> float | None:
    return None if when is None else round(when - start, 3)


def _tenants_of(view: FabricView, key: FlowKey) -> set[str | None]:
    return {view.tenant_of_ip(key.ipv4_src), view.tenant_of_ip(key.ipv4_dst)}


def _own_hosts(hm: HostMap, view: FabricView, tenant: str) -> dict[str, Any]:
    """The host map cut down to one tenant's hosts and the leaves they are under."""
    hosts = [h for h in hm.hosts if view.tenant_of_ip(h.ip) == tenant]
    leaves = {h.leaf for h in hosts}
    blocks = [
        {"name": b.name, "leaves": [asdict(leaf) for leaf in b.leaves if leaf.name in leaves]}
        for b in hm.blocks
    ]
    return {"hosts": [h.as_dict() for h in hosts], "blocks": [b for b in blocks if b["leaves"]]}
