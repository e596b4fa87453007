"""Checks docker/Dockerfile and docker/docker-compose.yml without a Docker engine (our machines
have none): the compose file parses as YAML and every reference in it resolves (services,
depends_on, volumes, build context and Dockerfile, port and environment shapes); the Dockerfile
has only known instructions, multi-stage references that exist, a non-root USER and an
ENTRYPOINT or CMD. Exits non-zero naming the first problem."""
import os
import re
import sys

import yaml

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DOCKER = os.path.join(ROOT, "docker")
INSTRUCTIONS = {"FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME", "USER",
                "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL"}


def fail(msg):
    sys.exit(f"docker lint: {msg}")


def dockerfile(path):
    lines = open(path).read().splitlines()
    logical, cur = [], ""
    for line in lines:
        s = line.strip()
        if not cur and (not s or s.startswith("#")):
            continue
        cur += " " + s.rstrip("\\").strip() if cur else s.rstrip("\\").strip()
        if not s.endswith("\\"):
            logical.append(cur)
            cur = ""
    if cur:
        fail(f"{path}: a line continuation runs off the end")
    stages, user, entry = [], None, False
    for l in logical:
        word = l.split()[0].upper()
        if word not in INSTRUCTIONS:
            fail(f"{path}: unknown instruction {word!r} in {l!r}")
        if not stages and word not in ("FROM", "ARG"):
            fail(f"{path}: {word} before FROM")
        if word == "FROM":
            m = re.match(r"FROM\s+(\S+)(\s+AS\s+(\S+))?$", l, re.I)
            if not m:
                fail(f"{path}: malformed FROM {l!r}")
            stages.append(m.group(3))
            user, entry = None, False
        m = re.search(r"--from=(\S+)", l)
        if word == "COPY" and m and m.group(1) not in stages[:-1]:
            fail(f"{path}: COPY --from={m.group(1)} names no earlier stage")
        if word == "USER":
            user = l.split()[1]
        if word in ("ENTRYPOINT", "CMD"):
            entry = True
    if user in (None, "root", "0"):
        fail(f"{path}: the final stage runs as root")
    if not entry:
        fail(f"{path}: the final stage has no ENTRYPOINT or CMD")
    return len(stages)


def compose(path):
    doc = yaml.safe_load(open(path))
    services = doc.get("services") or fail(f"{path}: no services")
    volumes = set((doc.get("volumes") or {}).keys())
    for name, s in services.items():
        if "image" not in s and "build" not in s:
            fail(f"{path}: service {name} has neither image nor build")
        b = s.get("build")
        if b:
            ctx = os.path.normpath(os.path.join(DOCKER, b["context"] if isinstance(b, dict) else b))
            df = os.path.join(ctx, b.get("dockerfile", "Dockerfile")) if isinstance(b, dict) else os.path.join(ctx, "Dockerfile")
            if not os.path.isfile(df):
                fail(f"{path}: service {name} builds from missing {df}")
        deps = s.get("depends_on") or {}
        for d in (deps if isinstance(deps, list) else deps.keys()):
            if d not in services:
                fail(f"{path}: service {name} depends on unknown service {d}")
        for p in s.get("ports", []):
            if not re.fullmatch(r"(\d+:)?\d+(/tcp|/udp)?", str(p)):
                fail(f"{path}: service {name} has malformed port {p!r}")
        for v in s.get("volumes", []):
            src = str(v).split(":")[0]
            if not src.startswith((".", "/")) and src not in volumes:
                fail(f"{path}: service {name} mounts undeclared volume {src}")
        env = s.get("environment") or {}
        if isinstance(env, dict) and any(not isinstance(v, (str, int)) for v in env.values()):
            fail(f"{path}: service {name} has a non-scalar environment value")
    return len(services)


if __name__ == "__main__":
    n = dockerfile(os.path.join(DOCKER, "Dockerfile"))
    m = compose(os.path.join(DOCKER, "docker-compose.yml"))
    print(f"ok: Dockerfile with {n} stages, compose with {m} services")
