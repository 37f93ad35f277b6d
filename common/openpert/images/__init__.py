"""Container images: the base images of ``docker/``, each component's Dockerfile, the build order, and environments to test components in.

Modules
-------
:mod:`~openpert.images.naming`
    Image names and tags from ``_viash.yaml`` and git.
:mod:`~openpert.images.requirements`
    Pinned requirement files: reading, merging along ``FROM`` chains, and pinning from an environment.
:mod:`~openpert.images.bases`
    The base images (``docker/<name>/Dockerfile`` with its ``requirements.txt``).
:mod:`~openpert.images.components`
    What a component's docker engine declares: its base image and the setup it adds.
:mod:`~openpert.images.dockerfiles`
    The Dockerfile a component's image is built from, and base Dockerfiles rendered for a build.
:mod:`~openpert.images.build_order`
    Every image of the project in the order they must be built.
:mod:`~openpert.images.environments`
    Virtual environments that hold exactly what an image holds, cached by the hash of its files.
:mod:`~openpert.images.shared_files`
    Identical files of environments stored once, as hard links.
:mod:`~openpert.images.component_tests`
    A component's test run in the environment of its image.
:mod:`~openpert.images.hadolint`
    The Dockerfile linter.
:mod:`~openpert.images.commands`
    The ``openpert images`` command line (also ``python -m openpert.images``).
"""

from openpert.config.viash import ConfigError


class ImageError(ConfigError):
    """An image, its files or an image environment is wrong; the message names the file and the problem."""
