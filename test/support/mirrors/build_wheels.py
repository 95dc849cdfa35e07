#!/usr/bin/env python3
"""Builds real wheels (py3-none-any) from Python distributions installed on this host.

PyPI cannot be reached from these machines, so the Python mirror of the tests serves wheels made from
the pure-Python packages Debian installed: for each distribution, its files (from RECORD, or from its
top-level packages when Debian left no RECORD) and a `.dist-info` with METADATA, WHEEL, the entry
points and a RECORD of sha256 hashes. The archives are deterministic: the same installed files give
the same bytes.

Usage: build_wheels.py OUT_DIR DISTRIBUTION...
Prints one JSON document: [{"name", "version", "filename", "sha256", "requires_python"}].
"""

import base64
import email.parser
import email.policy
import hashlib
import importlib.metadata as metadata
import json
import os
import re
import sys
import zipfile

# Requirements upstream declares and Debian's packaging dropped from the installed metadata.
RESTORED_REQUIREMENTS = {
    "python-dateutil": ["six>=1.5"],
}
# Files of the installed metadata carried into the wheel's .dist-info (the rest is written here).
KEPT_METADATA_FILES = ("entry_points.txt", "top_level.txt")
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def escape(component):
    return re.sub(r"[^\w\d.+]+", "_", component, flags=re.UNICODE)


def record_hash(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def skipped(rel):
    parts = rel.split("/")
    return rel.startswith("../") or "__pycache__" in parts or rel.endswith((".pyc", ".pyo"))


def package_files(dist, site):
    """Paths (relative to site-packages) of the distribution's importable files."""
    if dist.files is not None:
        rels = [str(f).replace(os.sep, "/") for f in dist.files]
        # The installed metadata directory is not copied: the wheel gets a .dist-info of its own.
        rels = [r for r in rels if not skipped(r) and not r.split("/")[0].endswith((".dist-info", ".egg-info"))]
        return sorted(r for r in rels if os.path.isfile(os.path.join(site, r)))
    top = (dist.read_text("top_level.txt") or "").split()
    if not top:
        raise SystemExit(f"{dist.metadata['Name']}: no RECORD and no top_level.txt; cannot tell its files")
    rels = []
    for name in top:
        pkg = os.path.join(site, name)
        if os.path.isdir(pkg):
            for root, dirs, files in os.walk(pkg):
                dirs[:] = sorted(d for d in dirs if d != "__pycache__")
                for f in files:
                    rel = os.path.relpath(os.path.join(root, f), site).replace(os.sep, "/")
                    if not skipped(rel):
                        rels.append(rel)
        elif os.path.isfile(pkg + ".py"):
            rels.append(name + ".py")
        else:
            raise SystemExit(f"{dist.metadata['Name']}: top-level name {name!r} is neither a package nor a module in {site}")
    return sorted(rels)


def wheel_metadata(dist):
    """METADATA for the wheel: the installed metadata, its Requires-Dist taken from the distribution's requirements."""
    raw = dist.read_text("METADATA") or dist.read_text("PKG-INFO")
    if not raw:
        raise SystemExit(f"{dist.name}: no METADATA or PKG-INFO")
    source = email.parser.Parser(policy=email.policy.compat32).parsestr(raw)
    name = source["Name"]
    version = source["Metadata-Version"] or "1.0"
    if tuple(int(p) for p in version.split(".")[:2]) < (2, 1):
        version = "2.1"  # Requires-Dist needs 1.2 or later; 2.1 describes every field written here
    lines = [f"Metadata-Version: {version}"]
    # Header values keep their own folding (continuation lines), as the installed file had them.
    lines += [f"{key}: {value}" for key, value in source.items() if key.lower() not in ("metadata-version", "requires-dist")]
    lines += [f"Requires-Dist: {req}" for req in list(dist.requires or []) + RESTORED_REQUIREMENTS.get(normalize(name), [])]
    text = "\n".join(lines) + "\n"
    body = source.get_payload()
    if isinstance(body, str) and body.strip():
        text += "\n" + body
    return name, text


def build(dist, out_dir):
    site = str(dist.locate_file(""))
    name, meta = wheel_metadata(dist)
    version = dist.version
    files = package_files(dist, site)
    native = [f for f in files if f.endswith((".so", ".pyd", ".dll", ".dylib"))]
    if native:
        raise SystemExit(f"{name} is not pure Python ({native[0]}); it cannot become a py3-none-any wheel")
    dist_info = f"{escape(name)}-{escape(version)}.dist-info"
    filename = f"{escape(name)}-{escape(version)}-py3-none-any.whl"
    entries = [(rel, open(os.path.join(site, rel), "rb").read()) for rel in files]
    entries.append((f"{dist_info}/METADATA", meta.encode()))
    wheel = "Wheel-Version: 1.0\nGenerator: lemniscate-build-wheels 1\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    entries.append((f"{dist_info}/WHEEL", wheel.encode()))
    for extra in KEPT_METADATA_FILES:
        text = dist.read_text(extra)
        if text:
            entries.append((f"{dist_info}/{extra}", text.encode()))
    record = "".join(f"{path},{record_hash(data)},{len(data)}\n" for path, data in entries)
    record += f"{dist_info}/RECORD,,\n"
    entries.append((f"{dist_info}/RECORD", record.encode()))
    target = os.path.join(out_dir, filename)
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path, data in entries:
            info = zipfile.ZipInfo(path, date_time=ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)
    digest = hashlib.sha256(open(target, "rb").read()).hexdigest()
    return {"name": name, "version": version, "filename": filename, "sha256": digest, "requires_python": dist.metadata["Requires-Python"]}


def main(argv):
    if len(argv) < 3:
        raise SystemExit(__doc__)
    out_dir = argv[1]
    os.makedirs(out_dir, exist_ok=True)
    built = []
    for wanted in argv[2:]:
        try:
            dist = metadata.distribution(wanted)
        except metadata.PackageNotFoundError:
            raise SystemExit(f"the Python distribution {wanted!r} is not installed for {sys.executable}")
        built.append(build(dist, out_dir))
    json.dump(built, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv)
