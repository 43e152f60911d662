"""Spec to script text: #SBATCH directives (directives), the step line (step), the Jinja rendering (render) and
the checks on a finished script (doctor)."""
