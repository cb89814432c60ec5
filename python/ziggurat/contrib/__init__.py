"""Integrations of ziggurat with web frameworks.

Each submodule imports its framework, which stays an optional dependency: install the
matching extra (``pip install "ziggurat[django]"``) and name the submodule where the
framework expects it, e.g. ``"BACKEND": "ziggurat.contrib.django.ZigguratCache"``.

>>> import ziggurat.contrib
>>> ziggurat.contrib.__name__
'ziggurat.contrib'
"""
