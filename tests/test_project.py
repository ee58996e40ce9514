"""Project-level guarantees: migrations match the models, production settings pass
Django's deployment checklist."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

BASE_DIR = Path(__file__).resolve().parent.parent


@pytest.mark.django_db
def test_models_have_no_missing_migrations():
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)


def test_production_settings_pass_check_deploy(tmp_path):
    env = {
        **os.environ,
        "TANDEM_ENV": "production",
        "DEBUG": "0",
        "SECRET_KEY": "prod-" + "k3y!" * 16,
        "ALLOWED_HOSTS": "tandem.example.com",
        "TANDEM_VAR_DIR": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=BASE_DIR, env=env, capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_production_refuses_to_start_without_a_secret_key(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "SECRET_KEY"}
    env.update(TANDEM_ENV="production", TANDEM_VAR_DIR=str(tmp_path))
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=BASE_DIR, env=env,
                            capture_output=True, text=True)
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr
