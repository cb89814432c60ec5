"""This directory is a Django project run by ``django-admin test`` (see
test_django_suite.py), not by pytest: its modules import Django's test sources."""

collect_ignore_glob = ["*.py"]
