"""Builds real, installable wheels from Debian's Python packages, for a Python package index on a
machine that reaches Debian's archive but not PyPI.

Usage: python3 debian-wheels.py OUT_DIR DEB_PACKAGE...

Each .deb is downloaded with `apt-get download` (nothing is installed on the host) and unpacked; the
files of its distribution under usr/lib/python3/dist-packages become a pure-Python wheel
(py3-none-any) with a dist-info holding the distribution's METADATA (Requires-Dist kept, or rebuilt
from an egg-info's requires.txt), its entry points, WHEEL and a RECORD of sha256 hashes.
"""
import base64
import email.parser
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import zipfile

SITE = 'usr/lib/python3/dist-packages'


def normalize(name):
    return re.sub(r'[-_.]+', '_', name)


def record_hash(data):
    return 'sha256=' + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()


def requires_from_egg(text):
    """requires.txt → Requires-Dist lines (sections with a marker become markers; extras are dropped)."""
    out, marker = [], None
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith('['):
            section = line.strip('[]')
            if section.startswith(':'):
                marker = section[1:]
            else:
                marker = 'skip'
            continue
        if marker == 'skip':
            continue
        out.append(f'{line}; {marker}' if marker else line)
    return out


def build(deb_dir, out_dir):
    site = os.path.join(deb_dir, SITE)
    infos = [d for d in os.listdir(site) if d.endswith('.dist-info') or d.endswith('.egg-info')]
    if len(infos) != 1:
        raise SystemExit(f'{deb_dir}: expected one distribution, found {infos}')
    info = os.path.join(site, infos[0])
    egg = info.endswith('.egg-info')
    meta_path = os.path.join(info, 'PKG-INFO' if egg else 'METADATA') if os.path.isdir(info) else info
    meta_text = open(meta_path, encoding='utf-8').read()
    meta = email.parser.Parser().parsestr(meta_text)
    name, version = meta['Name'], meta['Version']
    if egg and os.path.isdir(info) and os.path.exists(os.path.join(info, 'requires.txt')):
        head, _, body = meta_text.partition('\n\n')
        extra = ''.join(f'Requires-Dist: {r}\n' for r in requires_from_egg(open(os.path.join(info, 'requires.txt')).read()))
        meta_text = head.rstrip('\n') + '\n' + extra + '\n' + body
    dist_info = f'{normalize(name)}-{version}.dist-info'
    wheel_name = f'{normalize(name)}-{version}-py3-none-any.whl'
    files = []
    for root, dirs, names in os.walk(site):
        dirs[:] = [d for d in dirs if os.path.join(root, d) != info and d != '__pycache__']
        for n in names:
            full = os.path.join(root, n)
            if full == info or n.endswith('.pyc'):
                continue
            files.append((os.path.relpath(full, site), open(full, 'rb').read()))
    extras = {'METADATA': meta_text.encode(), 'WHEEL': b'Wheel-Version: 1.0\nGenerator: lemniscate-debian-wheels\nRoot-Is-Purelib: true\nTag: py3-none-any\n'}
    if os.path.isdir(info):
        for n in ('entry_points.txt', 'top_level.txt'):
            p = os.path.join(info, n)
            if os.path.exists(p):
                extras[n] = open(p, 'rb').read()
    for n, data in extras.items():
        files.append((f'{dist_info}/{n}', data))
    record = ''.join(f'{p},{record_hash(d)},{len(d)}\n' for p, d in files) + f'{dist_info}/RECORD,,\n'
    files.append((f'{dist_info}/RECORD', record.encode()))
    path = os.path.join(out_dir, wheel_name)
    with zipfile.ZipFile(path, 'w', zipfile.ZIP_DEFLATED) as z:
        for p, d in sorted(files):
            z.writestr(p, d)
    return wheel_name


def main():
    out_dir, packages = sys.argv[1], sys.argv[2:]
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(['apt-get', 'download', '-q', *packages], cwd=tmp, check=True, stdout=subprocess.DEVNULL)
        for deb in sorted(f for f in os.listdir(tmp) if f.endswith('.deb')):
            unpacked = os.path.join(tmp, deb[:-4])
            subprocess.run(['dpkg-deb', '-x', os.path.join(tmp, deb), unpacked], check=True)
            print(build(unpacked, out_dir))


if __name__ == '__main__':
    main()
