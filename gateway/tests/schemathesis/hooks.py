"""Schemathesis hooks: the rules of a request that an OpenAPI document can't state.

The document states every rule one field carries (`einsora.options.v1.rules`). A few of the
api's rules hold across fields, or against this installation's catalog: ListUsage's and
GetUsageReport's `to` comes after `from`, and both are instants from year 1 to 9999 in UTC
(which no string format says), and so do ListActivity's when given;
CreateWorkload's class is offered in the region, its image runs the kind on the class's
accelerator, its parameters are the kind's own, and its fallback classes are offered there
too; SetQuota's class is one of the catalog's (CPUs and memory only for a CPU class), and its
team or user one of the tenant's. These hooks make the cases Schemathesis generates as valid ones valid by those rules as
well, so that the positive-data check asks what it means to ask. Negative cases go as
generated: the document's rules are what they break.

One check's failure isn't one: a workload stays readable after its own DELETE (see below).
"""

import os
from datetime import datetime, timedelta, timezone

import requests
import schemathesis

KINDS = ("notebook", "endpoint", "vm")
_catalog = None


def positive(case):
    return case.meta is not None and case.meta.generation.mode.is_positive


def held(text):
    """The time `text` as the API can hold it: from year 1 to 9999 in UTC. RFC 3339 can write a
    time past either end on the edge days (`0001-01-01T00:00:00+01:00`), which the API refuses;
    such a time becomes the same wall time in UTC."""
    at = datetime.fromisoformat(text)
    try:
        at.astimezone(timezone.utc)
        return at
    except OverflowError:
        return at.replace(tzinfo=timezone.utc)


@schemathesis.hook("map_case").apply_to(method="GET", path="/v1/usage")
def range_forwards(context, case):
    """Times the API can hold, and `to` after `from`: swapped, or a second apart if equal."""
    if not positive(case):
        return case
    start, end = held(case.query["from"]), held(case.query["to"])
    if end < start:
        start, end = end, start
    elif end == start:
        try:
            end += timedelta(seconds=1)
        except OverflowError:
            start -= timedelta(seconds=1)
    case.query["from"], case.query["to"] = start.isoformat(), end.isoformat()
    return case


@schemathesis.hook("map_case").apply_to(method="GET", path="/v1/usage/report")
def report_range_forwards(context, case):
    """The usage report's `from` and `to`, as the records'."""
    return range_forwards(context, case)


@schemathesis.hook("map_case").apply_to(method="GET", path="/v1/activity")
def activity_range_forwards(context, case):
    """The activity log's `from` and `to` are optional: each one given is a time the API can
    hold, and when both are, `to` comes after `from`, as the usage's."""
    if not positive(case) or not case.query:
        return case
    for key in ("from", "to"):
        if key in case.query:
            case.query[key] = held(case.query[key]).isoformat()
    if "from" in case.query and "to" in case.query:
        return range_forwards(context, case)
    return case


@schemathesis.hook("map_case").apply_to(method="GET", path="/v1/workloads/{id}/logs")
def one_page(context, case):
    """A followed stream lasts until its workload stops, which no case waits for: every case
    asks for one page (the end-to-end tests follow)."""
    if case.query and "follow" in case.query:
        case.query["follow"] = "false"
    return case


def catalog(case):
    global _catalog
    if _catalog is None:
        url = case.operation.schema.get_base_url().rstrip("/") + "/v1/catalog"
        token = os.environ["EINSORA_TOKEN"]
        answer = requests.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=10)
        answer.raise_for_status()
        _catalog = answer.json()
    return _catalog


def offered(cls, region):
    return not cls["regions"] or region in cls["regions"]


def choices(catalog, kind, regions):
    """Every (region, class, image) a workload of `kind` may have in one of `regions`."""
    return [
        (region, cls["name"], image["name"])
        for region in regions
        for cls in catalog["classes"]
        if offered(cls, region)
        for image in catalog["images"]
        if kind in image["kinds"]
        and (not image["classes"] or cls["name"] in image["classes"])
        and any(cls["accelerator"] in r["accelerators"] for r in image["runtimes"])
    ]


@schemathesis.hook("map_case").apply_to(method="POST", path="/v1/workloads")
def create_from_the_catalog(context, case):
    body = case.body
    if not positive(case) or not isinstance(body, dict):
        return case
    known = catalog(case)
    regions = [r["name"] for r in known["regions"]]
    # Without `region` the workload goes to the first one.
    kind = body["kind"]
    options = choices(known, kind, regions if "region" in body else regions[:1])
    region, body["gpu_class"], body["image"] = options[len(body["name"]) % len(options)]
    if "region" in body:
        body["region"] = region
    fallback = [
        name
        for name in ["cpu"] + [c["name"] for c in known["classes"] if offered(c, region)]
        if name != body["gpu_class"]
    ][: len(body.get("fallback", []))]
    if fallback:
        body["fallback"] = fallback
    else:
        body.pop("fallback", None)
        body.pop("fallback_after_s", None)
    for other in KINDS:
        if other != kind:
            body.pop(other, None)
    if kind == "endpoint":
        body.setdefault("endpoint", {"model": "org/model"})
    return case


@schemathesis.hook("map_case").apply_to(method="PUT", path="/v1/quotas")
def quota_of_a_known_class(context, case):
    """A team's or user's quota names one by ID, which a generated case can't know: valid cases
    set the tenant's quota, for one of the catalog's classes (or its default, `*`). CPUs and
    memory limit CPU classes only: on another class a valid case states neither."""
    body = case.body
    if not positive(case) or not isinstance(body, dict):
        return case
    known = catalog(case)["classes"]
    classes = [c["name"] for c in known] + ["*"]
    body["scope"], body["subject_id"] = "tenant", ""
    body["gpu_class"] = classes[len(body.get("gpu_class", "")) % len(classes)]
    cpu_classes = {c["name"] for c in known if c.get("accelerator") == "cpu"}
    if body["gpu_class"] not in cpu_classes:
        body.pop("cpus", None)
        body.pop("memory_gib", None)
    return case


WORKLOAD = "/v1/workloads/"


@schemathesis.hook
def filter_failure(context, failure, case, response):
    """DELETE /v1/workloads/{id} asks for a deletion and answers 202: the workload stays
    readable, as `deleting` until the controller has removed what it ran, then as `deleted`
    with include_deleted=true (its history stays). A read (GET) of that workload, or of what
    lies under its path, after its own DELETE is no use after free (ST301). Every other
    finding stands: another operation's use after free, any other check's failure."""
    if failure.code != "ST301" or failure.operation != "DELETE /v1/workloads/{id}":
        return True
    freed_by, freed = failure.free.split(" ", 1)
    used_by, used = failure.usage.split(" ", 1)
    read_of_it = used == freed or used.startswith(freed.rstrip("/") + "/")
    kept = freed_by == "DELETE" and freed.startswith(WORKLOAD) and used_by == "GET" and read_of_it
    return not kept
