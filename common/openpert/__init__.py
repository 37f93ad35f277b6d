"""openpert: a living benchmark for perturbation modelling.

The package is the harness: it reads Viash-format components, validates their
files, runs them locally or through Nextflow, scores them between controls and
renders the results website. Nothing in it is specific to one task.
"""

__version__ = "0.1.0"
