"""The directory the supervisor puts first on a Python program's PYTHONPATH under ``handler: program``: it holds only
``sitecustomize.py`` (slurmgen.task.python_hook says why)."""
