"""This directory is a Django project served by gunicorn in test_django_workers.py, not a
test module: pytest must not import it (its settings need the server's environment)."""

collect_ignore_glob = ["*.py"]
