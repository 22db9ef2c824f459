#!/usr/bin/python3
"""Checks deploy/docker/Dockerfile against the repository and the build tree.

No Docker engine is needed. The build stage's steps are the repository's own
scripts, which CI runs anyway (install_deps.sh, build.sh); this check makes
sure the Dockerfile still calls exactly those, with options they accept, and
that everything it copies exists:

  * stages: by default (the BUILD_BASE and RUNTIME_BASE arguments) a CUDA
    devel image builds, the matching CUDA runtime image runs (same CUDA
    version, Ubuntu 24.04), and the CUDA major.minor matches the nvcc CI
    builds with; the build passes ENABLE_CUDA to build.sh (the CPU image,
    which deploy/container/test.sh builds and runs with podman);
  * the build stage runs install_deps.sh and build.sh (with the CUDA_ARCH
    build argument as ATTN_CUDA_ARCHITECTURES), the runtime stage
    install_deps.sh --runtime-only; every repository path a RUN names exists
    and every option passed to install_deps.sh/bundle.sh is one they accept;
  * COPY sources from the context exist in git and are not excluded by
    Dockerfile.dockerignore; COPY --from=build sources exist in the build
    tree (after running the build stage's bundle.sh --bin-only on it);
  * runtime: non-root numeric USER matching the useradd, EXPOSE of ATTN_PORT,
    HEALTHCHECK through the entrypoint's health mode, ENTRYPOINT copied in.

  dockerfile_check.py --build-dir BUILD --work-dir DIR
"""

import argparse
import fnmatch
import os
import re
import shlex
import shutil
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOCKERFILE = os.path.join(ROOT, "deploy", "docker", "Dockerfile")
IGNOREFILE = DOCKERFILE + ".dockerignore"

errors = []


def error(msg):
    errors.append(msg)


def instructions(text):
    """(line number, INSTRUCTION, arguments) with continuations joined."""
    out, buf, start = [], "", 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not buf and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if buf and line.lstrip().startswith("#"):
            continue
        if not buf:
            start = n
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        word, _, rest = buf.strip().partition(" ")
        out.append((start, word.upper(), rest.strip()))
        buf = ""
    return out


def expand(value, env):
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: env.get(m.group(1) or m.group(2), m.group(0)),
                  value)


def split_flags(args):
    words = shlex.split(args)
    flags = {}
    while words and words[0].startswith("--"):
        key, _, value = words.pop(0)[2:].partition("=")
        flags[key] = value
    return flags, words


def git_files():
    out = subprocess.run(["git", "-C", ROOT, "ls-files", "--cached", "--others",
                          "--exclude-standard"], capture_output=True, text=True, check=True)
    return [f for f in out.stdout.splitlines() if os.path.exists(os.path.join(ROOT, f))]


def ignore_patterns():
    with open(IGNOREFILE, encoding="utf-8") as f:
        return [l.strip() for l in f if l.strip() and not l.startswith("#")]


def ignored(path, patterns):
    parts = path.split("/")
    for pat in patterns:
        pat = pat.rstrip("/")
        for i in range(1, len(parts) + 1):
            prefix = "/".join(parts[:i])
            if fnmatch.fnmatchcase(prefix, pat) or (
                    pat.startswith("**/") and fnmatch.fnmatchcase(parts[i - 1], pat[3:])):
                return True
    return False


def accepted_options(script):
    """Options a script's `case` parses ("--foo)" or "--foo=*)")."""
    with open(os.path.join(ROOT, script), encoding="utf-8") as f:
        return set(re.findall(r"(--[a-z][a-z-]*)(?:=\*)?\)", f.read()))


def check_script_calls(stage, run, where):
    """Repository scripts named in a RUN: exist, and get options they accept."""
    called = []
    for command in re.split(r"&&|;|\|\|", run):
        words = shlex.split(command)
        for i, word in enumerate(words):
            path = word.lstrip("/")
            if path.startswith("src/"):
                path = path[4:]
            if word.endswith(".sh") and word.startswith("/tmp/"):
                path = {"install_deps.sh": "deploy/scripts/install_deps.sh"}.get(
                    os.path.basename(word), word)
            if not path.startswith("deploy/"):
                continue
            if not os.path.exists(os.path.join(ROOT, path)):
                error(f"{where}: RUN names {path}, which is not in the repository")
                continue
            if path.endswith(".sh"):
                opts = [w.split("=")[0] for w in words[i + 1:] if w.startswith("--")]
                bad = [o for o in opts if o not in accepted_options(path)
                       and not (path.endswith("build.sh"))]
                if bad:
                    error(f"{where}: {path} does not accept {bad}")
                called.append((path, words[i + 1:]))
    return called


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build-dir", required=True)
    parser.add_argument("--work-dir", required=True)
    args = parser.parse_args()

    with open(DOCKERFILE, encoding="utf-8") as f:
        instrs = instructions(f.read())
    if not os.path.exists(IGNOREFILE):
        error("deploy/docker/Dockerfile.dockerignore is missing")
        patterns = []
    else:
        patterns = ignore_patterns()
        for must in (".git", "build*"):
            if must not in patterns:
                error(f"Dockerfile.dockerignore does not exclude {must}")
    files = git_files()

    global_args, stages = {}, []
    for n, word, rest in instrs:
        if word == "ARG" and not stages:
            key, _, value = rest.partition("=")
            global_args[key] = expand(value.strip('"'), global_args)
        elif word == "FROM":
            m = re.match(r"(\S+)(?:\s+AS\s+(\S+))?$", rest, re.I)
            stages.append({"line": n, "image": expand(m.group(1), global_args),
                           "name": m.group(2), "instrs": [], "env": {}, "args": {}})
        elif stages:
            stages[-1]["instrs"].append((n, word, rest))
        else:
            error(f"Dockerfile:{n}: {word} before the first FROM")
    if len(stages) < 2:
        error("Dockerfile must have a build and a runtime stage")
        return report()
    build, runtime = stages[0], stages[-1]

    # Base images.
    pat = r"nvidia/cuda:(\d+\.\d+\.\d+)-(devel|runtime)-ubuntu24\.04$"
    mb, mr = re.match(pat, build["image"]), re.match(pat, runtime["image"])
    if not mb or mb.group(2) != "devel":
        error(f"build stage image {build['image']} is not nvidia/cuda:X.Y.Z-devel-ubuntu24.04")
    if not mr or mr.group(2) != "runtime":
        error(f"runtime stage image {runtime['image']} is not nvidia/cuda:X.Y.Z-runtime-ubuntu24.04")
    if mb and mr and mb.group(1) != mr.group(1):
        error(f"build ({mb.group(1)}) and runtime ({mr.group(1)}) CUDA versions differ")
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc"
                                    if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if nvcc and mb:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
        m = re.search(r"release (\d+\.\d+)", out)
        if m and not mb.group(1).startswith(m.group(1) + "."):
            error(f"image CUDA {mb.group(1)} but CI builds with nvcc {m.group(1)}")

    # Stage contents.
    for stage in stages:
        stage["runs"] = []
        for n, word, rest in stage["instrs"]:
            where = f"Dockerfile:{n}"
            if word == "ARG":
                key, _, value = rest.partition("=")
                stage["args"][key] = value
            elif word == "ENV":
                for key, value in re.findall(r"(\w+)=(\S+)", rest):
                    stage["env"][key] = value
            elif word == "RUN":
                stage["runs"].append((where, rest, check_script_calls(stage, rest, where)))
            elif word == "COPY":
                flags, words = split_flags(rest)
                if words and words[0].startswith("["):
                    error(f"{where}: use the plain COPY form")
                    continue
                srcs = words[:-1]
                if "from" in flags:
                    stage.setdefault("copies_from", []).append((where, flags["from"], srcs, words[-1]))
                    continue
                for src in srcs:
                    src = src.rstrip("/")
                    if src == ".":
                        continue
                    hits = [f for f in files if f == src or f.startswith(src + "/")]
                    if not hits:
                        error(f"{where}: COPY source {src} is not in the repository")
                    elif all(ignored(f, patterns) for f in hits):
                        error(f"{where}: COPY source {src} is excluded by Dockerfile.dockerignore")
                stage.setdefault("copies", []).append((where, srcs, words[-1]))

    # Build stage: the CI scripts, with the architecture argument.
    called = [c for _, _, calls in build["runs"] for c in calls]
    scripts = [p for p, _ in called]
    for script in ("deploy/scripts/install_deps.sh", "deploy/scripts/build.sh"):
        if script not in scripts:
            error(f"build stage does not run {script}")
    if "CUDA_ARCH" not in build["args"]:
        error("build stage has no ARG CUDA_ARCH")
    if not any('ATTN_CUDA_ARCHITECTURES="${CUDA_ARCH}"' in run or
               "ATTN_CUDA_ARCHITECTURES=${CUDA_ARCH}" in run for _, run, _ in build["runs"]):
        error("build stage does not pass ATTN_CUDA_ARCHITECTURES=${CUDA_ARCH} to build.sh")
    if "ENABLE_CUDA" not in build["args"] or not any(
            '-DATTN_ENABLE_CUDA="${ENABLE_CUDA}"' in run for _, run, _ in build["runs"]):
        error('build stage does not pass -DATTN_ENABLE_CUDA="${ENABLE_CUDA}" to build.sh')

    # Produce what the runtime stage copies from the build stage: run the
    # build stage's bundle.sh call on this build tree, with /src/build and
    # /out mapped to local folders.
    mapping = {"/src/build": os.path.abspath(args.build_dir),
               "/out": os.path.join(os.path.abspath(args.work_dir), "docker-out")}
    for path, argv in called:
        if path == "deploy/bundle.sh":
            local = [mapping.get(a, a) for a in argv]
            proc = subprocess.run(["bash", os.path.join(ROOT, path)] + local,
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                error(f"build stage's {path} {' '.join(argv)} failed here: {proc.stderr.strip()}")
            else:
                print(f"dockerfile_check: ran {path} {' '.join(local)}")

    # Runtime stage.
    rt_called = [c for _, _, calls in runtime["runs"] for c in calls]
    if ("deploy/scripts/install_deps.sh", ["--runtime-only"]) not in rt_called:
        error("runtime stage does not run install_deps.sh --runtime-only")
    for where, frm, srcs, _ in runtime.get("copies_from", []):
        if frm != build["name"]:
            error(f"{where}: COPY --from={frm}: no such stage")
        for src in srcs:
            local = next((src.replace(k, v, 1) for k, v in mapping.items()
                          if src.startswith(k)), None)
            if local is None or not os.path.exists(local):
                error(f"{where}: COPY --from={frm} {src}: not produced by the build stage "
                      f"(looked for {local})")
            elif os.path.isdir(local):
                names = sorted(os.listdir(local))
                if "attn_server" not in names:
                    error(f"{where}: {src} has no attn_server")
                print(f"dockerfile_check: runtime image gets {src}: {' '.join(names)}")
    kinds = {w for _, w, _ in runtime["instrs"]}
    for need in ("USER", "EXPOSE", "HEALTHCHECK", "ENTRYPOINT"):
        if need not in kinds:
            error(f"runtime stage has no {need}")
    users = [r for _, w, r in runtime["instrs"] if w == "USER"]
    uid = users[-1].split(":")[0] if users else ""
    if not uid.isdigit() or uid == "0":
        error(f"runtime USER {uid!r} must be a numeric non-root UID")
    elif not any(f"--uid {uid}" in run for _, run, _ in runtime["runs"]):
        error(f"runtime stage creates no user with UID {uid}")
    port = runtime["env"].get("ATTN_PORT")
    exposed = [r for _, w, r in runtime["instrs"] if w == "EXPOSE"]
    if not port or port not in " ".join(exposed).replace("/tcp", "").split():
        error(f"EXPOSE {exposed} does not include ATTN_PORT {port}")
    entry = [r for _, w, r in runtime["instrs"] if w == "ENTRYPOINT"]
    copied = {dest for _, _, dest in runtime.get("copies", [])}
    if entry:
        prog = shlex.split(entry[-1].strip("[]").replace(",", " "))[0]
        if prog not in copied:
            error(f"ENTRYPOINT {prog} is not copied into the runtime stage")
        health = [r for _, w, r in runtime["instrs"] if w == "HEALTHCHECK"]
        if health and not re.search(re.escape(prog) + r'",\s*"health"', health[-1]):
            error("HEALTHCHECK does not use the entrypoint's health mode")
    return report()


def report():
    for e in errors:
        print(f"FAIL: {e}", file=sys.stderr)
    print(f"dockerfile_check: {len(errors)} problem(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
