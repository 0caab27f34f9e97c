#!/usr/bin/env python3
"""Writes the seed corpora of the tar_extract and results_xml fuzz targets.

    python3 fuzz/seeds.py        (from the repository root; rewrites fuzz/corpus/{tar_extract,results_xml})

tar_extract: small uncompressed rocforge tarballs (the manifest first, then the tree) that
install accepts, and one of each kind it must refuse, so the fuzzer starts from every branch of
crates/use/src/install/extract.rs. results_xml: gtest XML reports as clients write them. Deterministic:
the same bytes on every run. Tarballs end with their two zero blocks but without tar's 10 KiB
record padding, to keep the corpus small.
"""

import hashlib
import io
import json
import os
import tarfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
KEY = "ab" * 32


def entry(name, kind, data=b"", mode=0o644, link=""):
    info = tarfile.TarInfo(name)
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mode = mode
    info.type = kind
    info.linkname = link
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    return info, data


def manifest(files):
    listed = []
    for info, data in files:
        f = {"path": info.name.rstrip("/")}
        if info.type == tarfile.DIRTYPE:
            f["kind"] = "dir"
        elif info.type == tarfile.SYMTYPE:
            f["kind"] = "symlink"
            f["target"] = info.linkname
        else:
            f["kind"] = "file"
            f["size"] = len(data)
            f["sha256"] = hashlib.sha256(data).hexdigest()
            if info.mode & 0o111:
                f["executable"] = True
        listed.append(f)
    return {
        "schema": "rocforge.manifest/1",
        "name": "seed",
        "version": "1.0",
        "release": "test-1.0",
        "targets": ["gfx90c"],
        "key": KEY,
        "installed_size": sum(len(d) for i, d in files if i.type == tarfile.REGTYPE),
        "files": sorted(listed, key=lambda f: f["path"]),
    }


def tarball(entries, listed=None):
    """`entries` in tarball order; the manifest lists `listed` (default: the same)."""
    m = json.dumps(manifest(entries if listed is None else listed), sort_keys=True).encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
        info, _ = entry("rocforge-manifest.json", tarfile.REGTYPE, m)
        t.addfile(info, io.BytesIO(m))
        for info, data in entries:
            t.addfile(info, io.BytesIO(data) if info.type == tarfile.REGTYPE else None)
    raw = buf.getvalue().rstrip(b"\0")
    # Whole blocks, then the two zero blocks that end an archive.
    raw += b"\0" * (-len(raw) % 512)
    return raw + b"\0" * 1024


def write(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


lib = entry("lib", tarfile.DIRTYPE, mode=0o755)
so = entry("lib/libx.so.1", tarfile.REGTYPE, b"\x7fELF not really\n")
link = entry("lib/libx.so", tarfile.SYMTYPE, link="libx.so.1")
tool = entry("bin/tool", tarfile.REGTYPE, b"#!/bin/sh\necho hi\n", mode=0o755)
bindir = entry("bin", tarfile.DIRTYPE, mode=0o755)
hard = entry("lib/libx-copy.so.1", tarfile.LNKTYPE, link="lib/libx.so.1")
hard_listed = (entry("lib/libx-copy.so.1", tarfile.REGTYPE, so[1])[0], so[1])

tar = "tar_extract"
write(tar, "ok-tree.tar", tarball([bindir, tool, lib, so, link]))
write(tar, "ok-hardlink.tar", tarball([lib, so, hard], [lib, so, hard_listed]))
write(tar, "ok-empty.tar", tarball([]))
write(tar, "bad-escaping-symlink.tar", tarball([entry("up", tarfile.SYMTYPE, link="../../etc")]))
write(tar, "bad-through-symlink.tar",
      tarball([entry("d", tarfile.SYMTYPE, link="lib"), lib, entry("d/x", tarfile.REGTYPE, b"x")]))
write(tar, "bad-dotdot.tar", tarball([entry("a/../../x", tarfile.REGTYPE, b"x")]))
write(tar, "bad-fifo-setuid.tar",
      tarball([entry("p", tarfile.FIFOTYPE), entry("s", tarfile.REGTYPE, b"s", mode=0o4755)]))
write(tar, "bad-size.tar", tarball([so], [(so[0], so[1] + b"more")]))

xml = "results_xml"
write(xml, "passed-failed-skipped.xml", b"""<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="3" failures="1" disabled="0" errors="0" time="0.5" name="AllTests">
  <testsuite name="A" tests="3" failures="1" disabled="0" skipped="1" errors="0" time="0.5">
    <testcase name="one" status="run" result="completed" time="0.5" classname="A" />
    <testcase name="two" status="run" result="completed" time="0" classname="A">
      <failure message="x.cpp:3&#x0A;Expected: 1" type=""><![CDATA[x.cpp:3
Expected: 1]]></failure>
    </testcase>
    <testcase name="three" status="run" result="skipped" time="0" classname="A">
      <skipped message="" />
    </testcase>
  </testsuite>
</testsuites>
""")
write(xml, "parameterized-notrun.xml", b"""<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="2" name="AllTests">
  <testsuite name="P/B" tests="2">
    <testcase name="x/0" value_param="4" status="notrun" result="suppressed" time="0" classname="P/B" />
    <testcase name="x/1" value_param="&quot;q&quot;" status="run" time="1.25" classname="P/B">
      <error message="crash &amp; burn" type="" />
      <failure message="second"><![CDATA[]]></failure>
    </testcase>
  </testsuite>
</testsuites>
""")
write(xml, "events.txt", b"""[==========] Running 2 tests from 1 test suite.
[ RUN      ] A.one
[       OK ] A.one (12 ms)
[ RUN      ] P/A.b/0
[  FAILED  ] P/A.b/0, where GetParam() = 4 (3 ms)
[  SKIPPED ] A.c (0 ms)
A.
  one
  two  # GetParam() = 3
""")
