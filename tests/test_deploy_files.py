"""Static checks of the deployment files (docker/, docker-compose*.yml, .dockerignore,
docs/deploy.md): no Docker engine, no network. The compose files are read with PyYAML
(anchors and merge keys resolved as Compose resolves them), the entrypoint is run in its
dry-run mode, which prints each command instead of running it, and the worker command
lines are compared with the ones the code itself builds (inference.worker.commandline)."""

from __future__ import annotations

import importlib
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from devstack.processes import WS_PING_INTERVAL_S
from inference.worker.commandline import worker_argv

ROOT = Path(__file__).resolve().parent.parent
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"
DOCKERFILE = ROOT / "docker" / "Dockerfile"

WORKER_ROLES = {"cpu-worker": "cpu", "prefill-worker": "prefill", "decode-worker": "decode",
                "colocated-worker": "colocated"}
ONE_SHOTS = ("prepare-model", "migrate", "seed")
TANDEM_SERVICES = ("web", *WORKER_ROLES, *ONE_SHOTS)
GPU_SERVICES = {"prefill-worker", "decode-worker"}


def load(name: str) -> dict:
    return yaml.safe_load((ROOT / name).read_text())


BASE = load("docker-compose.yml")
GPU = load("docker-compose.gpu.yml")
SERVICES = BASE["services"]


def interpolate(value) -> str:
    """Compose's `${VAR}`, `${VAR:-default}` and `${VAR:?error}` with nothing set in the
    environment: the default, or a placeholder where a value is required."""
    def sub(m: re.Match) -> str:
        op, arg = m.group(2), m.group(3) or ""
        return arg if op in ("-", ":-") else ("required-value" if op in ("?", ":?") else "")

    text = re.sub(r"\$\{(\w+)(:?[-?])?([^}]*)\}", sub, str(value))
    return text.replace("$$", "$")


def environment(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    assert isinstance(env, dict), "environment is written as a mapping"
    return {k: interpolate(v) for k, v in env.items()}


def env_names_read_by(path: Path) -> set[str]:
    """The variables a settings-style module reads: os.environ.get / env_bool / env_list."""
    pattern = r"(?:os\.environ\.get|os\.environ\.setdefault|env_bool|env_list)\(\s*\"([A-Z0-9_]+)\""
    return set(re.findall(pattern, path.read_text()))


def dry_run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(ENTRYPOINT), *args], capture_output=True, text=True, timeout=20,
        env={"PATH": "/usr/bin:/bin", **(env or {}), "TANDEM_ENTRYPOINT_DRY_RUN": "1"},
    )


def exec_line(result: subprocess.CompletedProcess) -> list[str]:
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("exec ")]
    assert len(lines) == 1, result.stdout
    return shlex.split(lines[0])[1:]


def worker_exec_line(result: subprocess.CompletedProcess, env: dict[str, str] | None = None) -> list[str]:
    """The Celery command a worker subcommand becomes: the entrypoint execs
    `python -m inference.worker ROLE SLOTS`, which execs what `--print` shows."""
    line = exec_line(result)
    assert line[:3] == ["python", "-m", "inference.worker"] and len(line) == 5, line
    printed = subprocess.run([sys.executable, "-m", "inference.worker", *line[3:], "--print"],
                             capture_output=True, text=True, timeout=60, cwd=ROOT,
                             env={"PATH": "/usr/bin:/bin", **(env or {})})
    assert printed.returncode == 0, printed.stderr
    return shlex.split(printed.stdout)


# --- compose: services, images, commands -------------------------------------------------


def test_every_compose_service_names_an_image_or_a_build():
    for name, service in {**SERVICES, **GPU["services"]}.items():
        assert service.get("image") or service.get("build"), name


def test_the_stack_has_the_databases_the_one_shots_web_and_each_worker_tier():
    assert {"postgres", "redis", *TANDEM_SERVICES} <= set(SERVICES)
    assert SERVICES["postgres"]["image"].split(":")[1].startswith("16")
    assert SERVICES["redis"]["image"].split(":")[1].startswith("7")


def test_tandem_services_build_the_repository_dockerfile_with_torch_pinned():
    for name in TANDEM_SERVICES:
        build = SERVICES[name]["build"]
        assert (ROOT / build["context"] / build["dockerfile"]).resolve() == DOCKERFILE, name
        assert str(build["args"]["TORCH_VERSION"]) == "2.13.0", name
        assert SERVICES[name]["command"][0] == name, "the service's name is its entrypoint subcommand"


@pytest.mark.parametrize("name,role", sorted(WORKER_ROLES.items()))
def test_each_worker_service_runs_its_own_tier_under_a_matching_role(name, role):
    service = SERVICES[name]
    assert service["command"] == [f"{role}-worker"]
    env = environment(service)
    assert env["TANDEM_ROLE"] == role
    if role != "cpu":
        assert env["TANDEM_POOL"] == "shared"


@pytest.mark.parametrize("name,role", sorted(WORKER_ROLES.items()))
def test_the_entrypoint_starts_each_worker_service_on_its_queue_exactly_as_the_code_does(name, role):
    env = environment(SERVICES[name])
    argv = worker_exec_line(dry_run(*SERVICES[name]["command"], env=env), env)
    queue = argv[argv.index("-Q") + 1]
    assert queue == ("cpu" if role == "cpu" else f"{role}.shared")
    slots = int(argv[argv.index("-c") + 1]) if "-c" in argv else 1
    assert (argv[argv.index("-P") + 1] == "solo") == (slots == 1)
    # Same argv as inference.worker.commandline.worker_argv (what `make run` starts), bar the interpreter.
    assert argv[1:] == worker_argv(role, env.get("TANDEM_POOL", "shared"), concurrency=slots)[1:]


@pytest.mark.parametrize("name", ["webhooks-worker", "actions-worker"])
def test_the_outbound_queues_workers_run_as_the_cpu_tier_with_the_command_line_make_run_uses(name):
    service = SERVICES[name]
    env = environment(service)
    assert service["command"] == [name] and env["TANDEM_ROLE"] == "cpu"
    line = exec_line(dry_run(name, env=env))
    package = f"tandem.{name.removesuffix('-worker')}"
    assert line == ["python", "-m", package]
    # What that module execs: queue.worker_argv, the devstack's, with the service's threads.
    queue = importlib.import_module(f"{package}.queue")
    main = (ROOT / package.replace(".", "/") / "__main__.py").read_text()
    assert "worker_argv(concurrency=" in main and "os.execv" in main
    argv = queue.worker_argv(concurrency=int(env["TANDEM_WORKER_CONCURRENCY"]))
    assert argv[argv.index("-Q") + 1] == queue.QUEUE and argv[argv.index("-P") + 1] == "threads"


def test_decode_and_prefill_slots_follow_their_batch_sizes_and_a_pool_comes_from_the_environment():
    env = {"TANDEM_POOL": "acme-dedicated", "TANDEM_MAX_BATCH": "16"}
    argv = worker_exec_line(dry_run("decode-worker", env=env), env)
    assert argv[argv.index("-Q") + 1] == "decode.acme-dedicated"
    assert argv[argv.index("-n") + 1] == "decode.acme-dedicated@%h"
    assert argv[argv.index("-c") + 1] == "16"
    argv = worker_exec_line(dry_run("prefill-worker", env={"TANDEM_PREFILL_MAX_BATCH": "4"}))
    assert argv[argv.index("-c") + 1] == "4"


def test_a_worker_whose_role_contradicts_its_subcommand_refuses_to_start():
    result = dry_run("decode-worker", env={"TANDEM_ROLE": "prefill"})
    assert result.returncode == 64
    assert "contradicts" in result.stderr


def test_web_migrates_then_serves_daphne_on_all_interfaces_port_8000():
    result = dry_run("web", env={"TANDEM_MODEL": "/models/m"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    migrate = next(i for i, line in enumerate(lines) if "manage.py migrate" in line)
    daphne = next(i for i, line in enumerate(lines) if "tandem.webserver" in line)  # daphne's CLI
    assert migrate < daphne
    argv = shlex.split(lines[daphne])[1:]
    # One endpoint on every interface, port 8000, with a listen backlog a burst of
    # visitors fits in (Twisted's default of 50 dropped their SYNs).
    endpoint = dict(part.split("=", 1) for part in argv[argv.index("-e") + 1].removeprefix("tcp:").split(":"))
    assert endpoint == {"port": "8000", "interface": "0.0.0.0", "backlog": "4096"}
    assert "-b" not in argv and "-p" not in argv
    # The same keepalive default as make run's (devstack.processes.daphne_argv).
    assert argv[argv.index("--ping-interval") + 1] == WS_PING_INTERVAL_S
    assert argv[-1] == "tandem.asgi:application"


def test_the_entrypoint_has_every_subcommand_and_prepares_the_model_only_when_asked():
    for sub, expected in (("migrate", "manage.py migrate"), ("manage", "manage.py")):
        assert expected in dry_run(sub).stdout
    assert "-Q colocated.shared" in " ".join(worker_exec_line(dry_run("colocated-worker")))
    prepared = dry_run("prepare-model", env={"TANDEM_MODEL": "/models/m", "TANDEM_PREPARE_MODEL": "0"})
    assert prepared.returncode == 0 and "/models/m" in prepared.stdout  # prepare-model always prepares
    skipped = dry_run("cpu-worker", env={"TANDEM_MODEL": "/models/m", "TANDEM_PREPARE_MODEL": "0"})
    assert "/models/m" not in skipped.stdout


def test_seed_refuses_the_development_admin_password_in_production():
    refused = dry_run("seed", env={"TANDEM_ENV": "production", "TANDEM_ADMIN_PASSWORD": "tandem-admin"})
    assert refused.returncode == 64
    allowed = dry_run("seed", env={"TANDEM_ENV": "production", "TANDEM_ADMIN_PASSWORD": "s3cret-pw"})
    assert exec_line(allowed)[-1] == "seed_demo"


# --- compose: environment ----------------------------------------------------------------


def test_web_is_given_every_variable_the_settings_read():
    read = env_names_read_by(ROOT / "tandem" / "settings.py") - {"DJANGO_SETTINGS_MODULE"}
    assert {"SECRET_KEY", "ALLOWED_HOSTS", "DATABASE_URL", "REDIS_URL"} <= read  # the regex still works
    missing = read - set(SERVICES["web"]["environment"])
    assert not missing, f"web lacks {sorted(missing)}"


def test_web_runs_in_production_with_secrets_that_compose_requires_from_the_env_file():
    raw = SERVICES["web"]["environment"]
    assert raw["TANDEM_ENV"] == "production"
    for name in ("SECRET_KEY", "ALLOWED_HOSTS"):
        assert re.fullmatch(r"\$\{" + name + r":\?[^}]+\}", raw[name]), name
    env = environment(SERVICES["web"])
    assert env["DATABASE_URL"].startswith("postgres://") and "@postgres:5432/" in env["DATABASE_URL"]
    assert env["REDIS_URL"].startswith("redis://redis:6379/")


@pytest.mark.parametrize("name", ["prefill-worker", "decode-worker"])
def test_model_workers_get_the_variables_their_engine_config_reads(name):
    read = env_names_read_by(ROOT / "inference" / "worker" / "config.py")
    env = environment(SERVICES[name])
    need = {"TANDEM_ROLE", "TANDEM_POOL", "TANDEM_DEVICE", "TANDEM_DTYPE", "TANDEM_THREADS",
            "TANDEM_CPU_AFFINITY", "TANDEM_KV_URL"}
    need |= {"TANDEM_PREFILL_MAX_BATCH"} if name == "prefill-worker" else {"TANDEM_MAX_BATCH", "TANDEM_KERNELS"}
    assert need <= read and need <= set(env)
    # worker_config calls int() on these: an empty default would crash the worker at start.
    assert int(env.get("TANDEM_MAX_BATCH", "64")) > 0 and int(env.get("TANDEM_PREFILL_MAX_BATCH", "8")) > 0


def test_every_tandem_variable_compose_sets_is_one_the_code_reads():
    known = set()
    for path in (ROOT / "tandem" / "settings.py", ROOT / "inference" / "worker" / "config.py",
                 ROOT / "inference" / "worker" / "commandline.py", ENTRYPOINT,
                 ROOT / "tenants" / "management" / "commands" / "seed_demo.py"):
        known |= set(re.findall(r"\bTANDEM_[A-Z0-9_]+", path.read_text()))
    for compose in (BASE, GPU):
        for name, service in compose["services"].items():
            unknown = {k for k in service.get("environment") or {} if k.startswith("TANDEM_")} - known
            assert not unknown, f"{name}: {sorted(unknown)} are read by nothing"


# --- compose: ordering, health, scaling ---------------------------------------------------


def test_postgres_and_redis_have_healthchecks():
    assert "pg_isready" in " ".join(SERVICES["postgres"]["healthcheck"]["test"])
    assert "ping" in SERVICES["redis"]["healthcheck"]["test"]


LONG_RUNNING = ["web", "cpu-worker", "prefill-worker", "decode-worker", "colocated-worker", "webhooks-worker",
                "actions-worker"]


@pytest.mark.parametrize("name", LONG_RUNNING)
def test_long_running_services_wait_for_healthy_stores_a_migrated_schema_and_the_model(name):
    deps = SERVICES[name]["depends_on"]
    assert deps["postgres"]["condition"] == "service_healthy"
    assert deps["redis"]["condition"] == "service_healthy"
    assert deps["migrate"]["condition"] == "service_completed_successfully"
    assert deps["prepare-model"]["condition"] == "service_completed_successfully"


@pytest.mark.parametrize("name", LONG_RUNNING)
def test_long_running_services_have_a_healthcheck_for_their_own_tier(name):
    test = SERVICES[name]["healthcheck"]["test"]
    assert test == ["CMD", "tandem-entrypoint", "healthcheck", name]
    # ... and the entrypoint's healthcheck has a case for that tier.
    body = ENTRYPOINT.read_text().split("healthcheck() {", 1)[1].split("\n}\n", 1)[0]
    labels = re.findall(r"^\s+([\w|-]+)\)$", body, re.M)
    assert any(name in label.split("|") for label in labels), labels


def test_one_shots_wait_for_what_they_need_and_do_not_restart():
    assert SERVICES["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert SERVICES["seed"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    for name in ONE_SHOTS:
        assert SERVICES[name]["restart"] == "no"


def test_worker_services_can_be_scaled():
    for name in WORKER_ROLES:
        assert "container_name" not in SERVICES[name], name
        assert "ports" not in SERVICES[name], name


def test_web_can_be_scaled_behind_the_proxy_with_one_host_port_per_replica():
    web = SERVICES["web"]
    assert "container_name" not in web
    [mapping] = web["ports"]
    assert "${TANDEM_HTTP_PORT:-8000}" in mapping  # TANDEM_HTTP_PORT=8000-8003 for --scale web=4
    scaled = mapping.replace("${TANDEM_HTTP_PORT:-8000}", "8000-8003")
    assert re.fullmatch(r"127\.0\.0\.1:8000-8003:8000", interpolate(scaled)), scaled
    docs = (ROOT / "docs" / "deploy.md").read_text()
    assert "--scale web=" in docs and "TANDEM_HTTP_PORT=8000-" in docs


def test_all_tandem_services_share_the_model_volume_and_only_prepare_model_writes_it():
    assert "models" in BASE["volumes"]
    for name in ("web", *WORKER_ROLES):
        assert "models:/models:ro" in SERVICES[name]["volumes"], name
    assert "models:/models" in SERVICES["prepare-model"]["volumes"]
    for name in TANDEM_SERVICES:
        assert interpolate(environment(SERVICES[name])["TANDEM_MODEL"]).startswith("/models/"), name


# --- the GPU override ---------------------------------------------------------------------


def gpu_devices(service: dict) -> list:
    return (((service.get("deploy") or {}).get("resources") or {}).get("reservations") or {}).get("devices") or []


def test_the_gpu_override_reserves_nvidia_gpus_for_prefill_and_decode_only():
    reserved = {name for name, s in GPU["services"].items() if gpu_devices(s)}
    assert reserved == GPU_SERVICES
    assert not any(gpu_devices(s) for s in SERVICES.values()), "the base file reserves no GPU"
    for name in GPU_SERVICES:
        for device in gpu_devices(GPU["services"][name]):
            assert device["driver"] == "nvidia" and "gpu" in device["capabilities"]


def test_the_gpu_override_runs_cuda_torch_on_cuda_for_services_the_base_file_defines():
    assert set(GPU["services"]) <= set(SERVICES)
    for name in GPU_SERVICES:
        service = GPU["services"][name]
        assert service["environment"]["TANDEM_DEVICE"] == "cuda"
        assert str(service["build"]["args"]["TORCH_VERSION"]) == "2.13.0"
        assert "whl/cpu" not in interpolate(service["build"]["args"]["TORCH_INDEX_URL"])
        assert interpolate(service["image"]) != interpolate(SERVICES[name]["image"])


# --- Dockerfile, entrypoint, .dockerignore, docs ------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_the_dockerfile_is_python_3_11_slim_with_torch_pinned_like_the_makefile():
    instr = dockerfile_instructions()
    assert [rest for word, rest in instr if word == "FROM"][0].startswith("python:3.11-slim")
    makefile_pin = re.search(r"torch==([0-9.]+)", (ROOT / "Makefile").read_text()).group(1)
    assert "TORCH_VERSION=2.13.0" in [rest for word, rest in instr if word == "ARG"]
    assert makefile_pin == "2.13.0"
    runs = " ".join(rest for word, rest in instr if word == "RUN")
    assert 'pip install --index-url "${TORCH_INDEX_URL}" "torch==${TORCH_VERSION}"' in runs
    assert "TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu" in [r for w, r in instr if w == "ARG"]
    assert "pip install -c /etc/tandem-constraints.txt --no-deps --no-build-isolation ." in runs
    assert "collectstatic --noinput" in runs
    assert "tandem-entrypoint prepare-model" in runs  # PREPARE_MODEL=1 bakes the model in


def test_the_image_installs_exactly_the_runtime_lock_after_torch_and_checks_the_set():
    """Everything but torch comes from requirements.txt, hash-checked, with nothing
    resolved beside it; torch (CPU or CUDA build) is installed first, by version."""
    instr = dockerfile_instructions()
    steps = [(word, rest) for word, rest in instr if word in ("RUN", "COPY")]
    torch = next(i for i, (w, r) in enumerate(steps) if '"torch==${TORCH_VERSION}"' in r)
    copy_lock = steps.index(("COPY", "requirements.txt ./"))
    locked = steps.index(("RUN", "pip install --require-hashes --no-deps -r requirements.txt"))
    project = next(i for i, (w, r) in enumerate(steps) if "--no-build-isolation ." in r)
    assert torch < copy_lock < locked < project
    # pip check, forgiving only what the lock leaves out on purpose (devstack/lock.py).
    assert "python -m devstack.lock --pip-check" in steps[project][1]
    assert "pyproject.toml" not in " ".join(r for w, r in steps[:project]), \
        "no dependency is read from the ranges in pyproject.toml"
    runtime_lock = (ROOT / "requirements.txt").read_text()
    assert "--hash=sha256:" in runtime_lock and not re.search(r"^torch==", runtime_lock, re.M)
    docs = (ROOT / "docs" / "deploy.md").read_text()
    assert "requirements.txt" in docs and "--require-hashes" in docs


def test_make_installs_exactly_the_dev_lock_after_torch():
    makefile = (ROOT / "Makefile").read_text()
    stamp = makefile.split("$(STAMP): pyproject.toml $(LOCK)\n", 1)[1].split("\n\n", 1)[0]
    lines = [line.strip() for line in stamp.splitlines()]
    order = [next(i for i, line in enumerate(lines) if needle in line) for needle in (
        "devstack.lock --check", "--no-deps $(TORCH_PIP_ARGS) $(TORCH)",
        "--require-hashes --no-deps -r $(LOCK)", "--no-deps --no-build-isolation -e .", "devstack.lock --pip-check")]
    assert order == sorted(order), stamp
    assert re.search(r"^LOCK := requirements-dev\.txt$", makefile, re.M)


def test_the_image_can_build_the_engines_cpu_kernels_where_the_service_user_may_write():
    """The engine compiles its C kernels at first start (inference/engine/kernels): the
    image needs a C compiler, and the kernel cache must lie in a directory the service user
    owns (only /app/var and /models are chowned to it)."""
    text = DOCKERFILE.read_text()
    runs = " ".join(rest for word, rest in dockerfile_instructions() if word == "RUN")
    assert re.search(r"apt-get install [^&]*\bgcc\b", runs) and "libc6-dev" in runs
    kernel_dir = re.search(r"TANDEM_KERNEL_DIR=(\S+)", text).group(1)
    assert kernel_dir.startswith("/app/var/") and "chown -R tandem:tandem /app/var" in runs
    assert "TANDEM_KERNEL_DIR" in (ROOT / "inference" / "engine" / "kernels" / "build.py").read_text()


def test_the_dockerfile_runs_as_a_non_root_user_and_starts_through_the_entrypoint():
    instr = dockerfile_instructions()
    users = [rest for word, rest in instr if word == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    assert any("useradd" in rest and users[-1].split(":")[0] in rest for word, rest in instr if word == "RUN")
    assert [rest for word, rest in instr if word == "ENTRYPOINT"] == ['["tandem-entrypoint"]']
    assert "docker/entrypoint.sh /usr/local/bin/tandem-entrypoint" in " ".join(r for _, r in instr)


def test_the_entrypoint_is_valid_bash():
    result = subprocess.run(["bash", "-n", str(ENTRYPOINT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed")
def test_the_entrypoint_passes_shellcheck():
    result = subprocess.run(["shellcheck", str(ENTRYPOINT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_the_dockerignore_keeps_secrets_and_local_state_out_but_not_what_the_build_needs():
    patterns = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")}
    assert {".git", ".venv", "var", ".env", "staticfiles"} <= patterns
    needed = {"pyproject.toml", "requirements.txt", "README.md", "manage.py", "docker", "tandem",
              "tenants", "inference", "templates", "static"}
    assert not needed & patterns


def test_deploy_docs_name_every_variable_the_deployment_sets():
    docs = (ROOT / "docs" / "deploy.md").read_text()
    names = env_names_read_by(ROOT / "tandem" / "settings.py")
    names |= env_names_read_by(ROOT / "inference" / "worker" / "config.py")
    names |= {"TANDEM_ROLE", "TANDEM_POOL", "POSTGRES_PASSWORD", "TANDEM_ADMIN_PASSWORD",
              "TANDEM_PREPARE_MODEL", "TANDEM_WORKER_CONCURRENCY"}
    missing = {n for n in names if f"`{n}`" not in docs}
    assert not missing, f"docs/deploy.md does not mention {sorted(missing)}"
    for must in ("acme-dedicated", "ComputePool", "--scale", "CSRF_TRUSTED_ORIGINS", "docker-compose.gpu.yml"):
        assert must in docs
