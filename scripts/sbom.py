#!/usr/bin/env python3
"""The SBOM of the einsora binary, as CycloneDX 1.5 JSON on standard output.

Its components are exactly the crates the binary links for TARGET: cargo's resolved graph
(`cargo metadata --locked`, filtered to the platform) walked from the `einsora` package over
normal dependencies, never dev- or build-only ones. Each names its version, licence, source
and, for registry crates, the SHA-256 that Cargo.lock pins.

scripts/sbom.py --version VERSION --target TARGET
"""

import argparse
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import tomllib
import uuid
from datetime import datetime, timezone

REPO = pathlib.Path(__file__).resolve().parent.parent


def metadata(target):
    out = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--locked", "--filter-platform", target],
        cwd=REPO, check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out)


def linked(meta, root_name):
    """The package IDs reachable from root_name over normal (not dev, not build) edges."""
    packages = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    root = next(i for i, p in packages.items() if p["name"] == root_name and p["source"] is None)
    seen, todo = {root}, [root]
    while todo:
        for dep in nodes[todo.pop()]["deps"]:
            normal = any(k["kind"] is None for k in dep["dep_kinds"])
            if normal and dep["pkg"] not in seen:
                seen.add(dep["pkg"])
                todo.append(dep["pkg"])
    return root, [packages[i] for i in sorted(seen)]


def checksums():
    lock = tomllib.loads((REPO / "Cargo.lock").read_text())
    return {(p["name"], p["version"]): p["checksum"] for p in lock["package"] if "checksum" in p}


def component(package, sums):
    name, version = package["name"], package["version"]
    c = {
        "type": "library",
        "bom-ref": f"pkg:cargo/{name}@{version}",
        "name": name,
        "version": version,
    }
    # A package URL names a crate of the registry; the workspace's own crates aren't there.
    if (package["source"] or "").startswith("registry+"):
        c["purl"] = f"pkg:cargo/{name}@{version}"
    if package.get("license"):
        c["licenses"] = [{"expression": package["license"]}]
    if (name, version) in sums:
        c["hashes"] = [{"alg": "SHA-256", "content": sums[(name, version)]}]
    if package["source"] is None:
        c["description"] = "part of Einsora's own workspace"
    return c


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--version", required=True)
    parser.add_argument("--target", required=True)
    args = parser.parse_args()
    meta = metadata(args.target)
    root, packages = linked(meta, "einsora")
    sums = checksums()
    components = [component(p, sums) for p in packages if p["id"] != root]
    # Reproducible: the time is SOURCE_DATE_EPOCH's where the release sets it (the commit's),
    # and the serial number is derived from what the SBOM lists.
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    when = datetime.fromtimestamp(int(epoch), timezone.utc) if epoch else datetime.now(timezone.utc)
    listed = json.dumps([args.version, args.target, components], sort_keys=True).encode()
    serial = uuid.UUID(hashlib.sha256(listed).hexdigest()[:32], version=5)
    bom = {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "serialNumber": f"urn:uuid:{serial}",
        "version": 1,
        "metadata": {
            "timestamp": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "tools": {"components": [{"type": "application", "name": "scripts/sbom.py"}]},
            "component": {
                "type": "application",
                "bom-ref": f"pkg:cargo/einsora@{args.version}",
                "name": "einsora",
                "version": args.version,
                "licenses": [{"expression": "MIT"}],
                "properties": [{"name": "target", "value": args.target}],
            },
        },
        "components": components,
        "dependencies": [
            {"ref": f"pkg:cargo/einsora@{args.version}", "dependsOn": [c["bom-ref"] for c in components]}
        ],
    }
    json.dump(bom, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
