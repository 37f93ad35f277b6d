"""Image environments: a virtual environment per base image holding exactly what the image holds.

Docker is not always at hand (nor fast); an image environment answers the same question, *does
this component run with what its image declares?*, in a plain virtual environment:

- A **base environment** holds exactly the requirement files of the image's ``FROM`` chain
  (``ml`` = core's pins + ml's pins), installed with ``--no-deps`` and proved closed by ``pip
  check``, plus the pinned test tools (``docker/test_requirements.txt``: pytest, which the image
  lacks) and the harness and pertsci installed ``--no-deps`` from the checkout (editable, so the
  environment runs the code of the work tree, as an image built from it would). It is built as
  its image is: the first image of a chain from scratch, the others as a copy of their ``FROM``
  image's environment (built first) with their own pins installed on top.
- A component that adds python packages gets an **overlay**: a copy of the base image's
  environment (built first) with the declared packages installed on top by pip (with their
  dependencies, upgrading by default), as the component's Dockerfile installs them on top of its
  base image. It is a complete environment rather than a ``.pth`` view onto the base one: the job
  sandbox shows a job only the environment of its interpreter. The copy hard-links the base's files
  (see :func:`_copy_env` for why pip cannot write through them), so it takes seconds and no disk.

The environments hold no pip of their own (a job needs none): the harness's pip installs into them
(``pip --python``), with the index configuration in effect. Their modules are compiled to bytecode
at build time, as a ``pip install`` in an image compiles them: jobs run them read-only and could not
cache it. The packages' own test suites (:data:`NOT_COMPILED`) are left as source: no job imports
them, and they are most of what there is to compile (core's compilation took 9.1 s with them, 3.7 s
without).

Environments are cached below a folder (default ``<project>/.cache/images``, or
``$OPENPERT_IMAGE_ENVS``) under a name keyed by the hash of what they are built from: the
requirement files, the test tools, the checkout's ``pyproject.toml`` and the interpreter. A build
that stopped half-way has no completion stamp and is rebuilt; a lock file keeps two processes
from building the same environment at once.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import openpert
from openpert.config.viash import ComponentConfig
from openpert.files import locked, write_text_atomic
from openpert.images import ImageError
from openpert.images.bases import base_chain, python_version, tool_requirements
from openpert.images.components import image_declaration
from openpert.images.requirements import RequirementsFile, merge_pins
from openpert.images.shared_files import CANNOT_LINK, share_identical_files

#: The file that marks a finished environment (and says what it was built from).
STAMP = ".openpert-image-env.json"
#: The merged pins an environment was installed from, kept inside it for reference.
PINS_FILE = "openpert-requirements.txt"
#: The files left uncompiled (a regular expression on their path): the test suites packages ship.
NOT_COMPILED = r"[/\\]tests?[/\\]"

Log = Callable[[str], None]


def log_to_stderr(message: str) -> None:
    """The default progress log: one line to stderr."""
    print(message, file=sys.stderr, flush=True)


def default_cache_dir(root: str | Path) -> Path:
    """``$OPENPERT_IMAGE_ENVS`` when set, else ``<root>/.cache/images``."""
    env = os.environ.get("OPENPERT_IMAGE_ENVS")
    return Path(env).resolve() if env else Path(root).resolve() / ".cache" / "images"


def harness_source() -> Path:
    """The checkout the running harness comes from (the folder with its ``pyproject.toml``).

    Raises
    ------
    ImageError
        When openpert is not running from a checkout (an installed wheel): environments install the
        harness from the same sources as the images.
    """
    source = Path(openpert.__file__).resolve().parents[2]
    if not (source / "pyproject.toml").is_file() or not (source / "common" / "pertsci").is_dir():
        raise ImageError(f"{source}: openpert is not running from a checkout (no pyproject.toml and common/pertsci "
                         "there); image environments install the harness from one")
    return source


@dataclasses.dataclass(frozen=True)
class ImageEnv:
    """A built image environment.

    Attributes
    ----------
    path
        Its folder (a virtual environment).
    base
        The base image it reproduces.
    key
        Hash of what it was built from.
    packages
        For an overlay: the python packages it adds to the base environment.
    built_seconds
        Seconds its build took now; ``None`` when it was taken from the cache.
    """

    path: Path
    base: str
    key: str
    packages: tuple[str, ...] = ()
    built_seconds: float | None = None

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    @property
    def label(self) -> str:
        return f"{self.base} + {' '.join(self.packages)}" if self.packages else self.base


def _check_interpreter(python: str, want: tuple[int, int], where: Path) -> str:
    proc = subprocess.run([python, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ImageError(f"{python}: cannot run this interpreter: {proc.stderr.strip()}")
    version = proc.stdout.strip()
    if tuple(int(x) for x in version.split(".")[:2]) != want:
        raise ImageError(f"{where}: the image has Python {want[0]}.{want[1]} but {python} is Python {version}; "
                         f"set OPENPERT_IMAGE_PYTHON to a python{want[0]}.{want[1]}")
    return version


def _interpreter(python: str | Path | None) -> str:
    return str(python or os.environ.get("OPENPERT_IMAGE_PYTHON") or sys.executable)


def _run(command: list[str], log_file: Path, what: str, env: dict | None = None) -> None:
    """Run a build step, appending its output to the build log; fail with the log's end."""
    with open(log_file, "a") as log:
        log.write(f"$ {' '.join(command)}\n")
        log.flush()
        proc = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    if proc.returncode != 0:
        tail = log_file.read_text(errors="replace")[-3000:]
        full = ""
        if "No space left on device" in tail:
            free = shutil.disk_usage(log_file.parent).free
            full = (f": the disk of {log_file.parent} is full ({free / 1e9:.1f} GB free now); free some, or set "
                    "OPENPERT_IMAGE_ENVS to a folder on a disk with room")
        raise ImageError(f"{what} failed (exit {proc.returncode}){full}; log {log_file}:\n{tail}")


@functools.cache
def _host_pip() -> bool:
    """Whether this interpreter's pip can install into another environment (``--python``: pip 22.3 or later)."""
    try:
        version = importlib.metadata.version("pip")
    except importlib.metadata.PackageNotFoundError:
        return False
    return tuple(int(part) for part in re.findall(r"\d+", version)[:2]) >= (22, 3)


def _pip(env_python: str) -> list[str]:
    """The pip command for the environment of ``env_python``: this interpreter's pip (the environment has
    none: ensurepip would cost seconds per build, and compile a pip no job uses), else the environment's own."""
    return [sys.executable, "-m", "pip", "--python", env_python] if _host_pip() else [env_python, "-m", "pip"]


def _pip_check(python: str, log_file: Path, what: str, ignore: tuple[str, ...] = ()) -> None:
    """``pip check``; problems of the packages named in ``ignore`` (line prefixes) are not errors."""
    command = [*_pip(python), "check"]
    proc = subprocess.run(command, capture_output=True, text=True, env=_pip_env())
    with open(log_file, "a") as log:
        log.write(f"$ {' '.join(command)}\n{proc.stdout}{proc.stderr}")
    problems = [line for line in proc.stdout.splitlines()
                if line.strip() and not line.startswith("No broken requirements") and not line.startswith(ignore)]
    if problems or (proc.returncode != 0 and not ignore):
        raise ImageError(f"{what} failed; log {log_file}:\n" + "\n".join(problems or [proc.stderr.strip()]))


def _pip_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV")}
    env["PIP_NO_INPUT"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _read_stamp(path: Path, key: str) -> dict | None:
    stamp = path / STAMP
    if not stamp.is_file():
        return None
    try:
        data = json.loads(stamp.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return data if data.get("key") == key and (path / "bin" / "python").exists() else None


def base_env_files(root: str | Path, base: str) -> list[RequirementsFile]:
    """The requirement files a base environment is built from: the ``FROM`` chain's, then the test tools."""
    files = [image.requirements() for image in base_chain(root, base)]
    tools = tool_requirements(root)
    return [*files, *([tools] if tools is not None else [])]


def _packaging_digest(pyproject: Path) -> str:
    """Hash of what the editable install takes from ``pyproject.toml``: the project table without its
    optional dependencies (extras are never installed here) and setuptools' settings.

    A new test tool in an extra then leaves the environments as they are.
    """
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the whole file, then (a rebuild more often, never a stale one)
        return hashlib.sha256(pyproject.read_bytes()).hexdigest()
    try:
        data = tomllib.loads(pyproject.read_text())
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise ImageError(f"{pyproject}: cannot read it: {err}") from None
    project = {k: v for k, v in data.get("project", {}).items() if k != "optional-dependencies"}
    relevant = {"project": project, "setuptools": data.get("tool", {}).get("setuptools", {})}
    return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()


def base_env_key(root: str | Path, base: str, python: str | Path | None = None) -> str:
    """Hash of what base environment ``base`` is built from (its cache folder is named by it)."""
    source = harness_source()
    digest = hashlib.sha256()
    for file in base_env_files(root, base):
        digest.update(file.path.name.encode() + b"\0" + file.path.read_bytes() + b"\0")
    digest.update(_packaging_digest(source / "pyproject.toml").encode())
    digest.update(str(source).encode())
    # The venv is tied to the interpreter it was made with (its path is written into pyvenv.cfg).
    digest.update(str(Path(_interpreter(python)).resolve()).encode())
    return digest.hexdigest()


def _env_folders(cache: Path) -> list[Path]:
    """Every environment folder below ``cache``, finished or not: base environments, then overlays, each by name."""
    return [folder for where in (cache, cache / "overlays") if where.is_dir()
            for folder in sorted(where.iterdir()) if folder.is_dir() and folder != cache / "overlays"]


#: The files of a virtual environment that name its folder: written anew in a copy, never linked.
_NAMES_ITS_FOLDER = ("pyvenv.cfg", "bin")


def _copy_env(base: Path, path: Path) -> dict[str, int]:
    """Copy the finished environment ``base`` to ``path``, hard-linking its files where the file system allows.

    A link is safe because nothing the overlay's build does writes into an existing file: pip
    removes a file before it writes one (installing, its script maker) and uninstalls by moving
    files away, and bytecode is written through a rename. What names the environment's folder
    (``pyvenv.cfg``, the scripts' shebangs and activate scripts of ``bin/``) is written anew with
    the new folder, and base's completion stamp is left out. Symbolic links (the interpreter,
    ``lib64``) are copied as links.

    Returns
    -------
    ``relative path -> inode`` of the files linked, to tell which of them the build left shared.
    """
    old, new = str(base).encode(), str(path).encode()
    linked: dict[str, int] = {}
    can_link = True
    for folder, dirs, names in os.walk(base):
        target = path / os.path.relpath(folder, base)
        target.mkdir(exist_ok=True)
        shutil.copymode(folder, target)
        for name in list(dirs):
            if os.path.islink(os.path.join(folder, name)):  # not walked into (followlinks is off)
                os.symlink(os.readlink(os.path.join(folder, name)), target / name)
        for name in names:
            source = os.path.join(folder, name)
            relative = os.path.relpath(source, base)
            if relative == STAMP:
                continue
            if os.path.islink(source):
                os.symlink(os.readlink(source), target / name)
            elif relative.split(os.sep, 1)[0] in _NAMES_ITS_FOLDER:
                (target / name).write_bytes(Path(source).read_bytes().replace(old, new))
                shutil.copymode(source, target / name)
            else:
                if can_link:
                    try:
                        os.link(source, target / name)
                        linked[relative] = os.lstat(source).st_ino
                        continue
                    except OSError as err:
                        if err.errno not in CANNOT_LINK:  # the file system has no hard links: copy
                            raise
                        can_link = False
                shutil.copy2(source, target / name)
    return linked


def _still_linked(path: Path, linked: dict[str, int]) -> tuple[int, int]:
    """How many of the ``linked`` files of ``path`` are still the base's (the build replaced none), and their size."""
    files = size = 0
    for relative, inode in linked.items():
        try:
            info = os.lstat(path / relative)
        except FileNotFoundError:
            continue  # the build removed it (an upgrade)
        if info.st_ino == inode:
            files += 1
            size += info.st_size
    return files, size


def bytecode_command(python: str | Path, env: str | Path) -> list[str]:
    """The command that compiles the modules of the environment at ``env`` to bytecode, but its packages' test suites.

    Parameters
    ----------
    python
        The environment's interpreter: bytecode is tied to the Python version.
    env
        The environment's folder.
    """
    # As pip's compilation does, a file that does not compile (torch ships one written for Python
    # 3.12) is left as source: a module without bytecode still imports, compiled as it is.
    program = "import compileall, re, sys; compileall.compile_dir(sys.argv[1], quiet=2, workers=0, rx=re.compile(sys.argv[2]))"
    return [str(python), "-c", program, str(Path(env) / "lib"), NOT_COMPILED]


def _build(path: Path, key: str, interpreter: str, pins: list, extras: list[str], upgrade: bool, strict: bool,
           what: str, log: Log, stamp: dict, cache: Path, base: Path | None = None, added: Sequence = ()) -> float:
    """Build one environment at ``path`` (removed first), then install ``extras`` on top with pip.

    Without ``base``: a new environment with ``pins`` and the harness. With ``base``: a copy of that
    finished environment (which holds the harness and every pin but the ``added`` ones), then the
    ``added`` pins, as an image's Dockerfile installs its own requirement file on top of its ``FROM``
    image.

    Its files equal to those of the finished environments of ``cache`` are then shared with them
    (:mod:`~openpert.images.shared_files`).
    """
    started = time.monotonic()
    if path.exists():
        shutil.rmtree(path)
    log(f"building environment {path.name} ({what})")
    path.parent.mkdir(parents=True, exist_ok=True)
    build_log = path.parent / f"{path.name}.build.log"
    build_log.write_text("")
    env_python = str(path / "bin" / "python")
    # Compiled to bytecode once every package is in (below), not as pip installs: jobs run the
    # environment read-only, so bytecode missing there would be compiled again on every import of every job.
    pip = [*_pip(env_python), "install", "--quiet", "--no-compile"]
    source = harness_source()
    linked: dict[str, int] = {}
    if base is not None:
        # Under the base's lock, so that no rebuild or prune removes it meanwhile; what is copied
        # then outlives it (hard links).
        with locked(base.parent / f".{base.name}.lock"):
            linked = _copy_env(base, path)
        if added:
            write_text_atomic(path / PINS_FILE, "".join(f"{pin}\n" for pin in pins))
            files = ", ".join(sorted({str(pin.source) for pin in added}))
            added_file = path.parent / f"{path.name}.added.txt"
            write_text_atomic(added_file, "".join(f"{pin}\n" for pin in added))
            try:
                _run([*pip, "--no-deps", "--requirement", str(added_file)], build_log,
                     f"{path}: installing the pins of {files}", _pip_env())
            finally:
                added_file.unlink(missing_ok=True)
            # Not strict: a stand-in image may lack the harness's dependencies; its pins must still be closed.
            _pip_check(env_python, build_log, f"{path}: pip check: the requirement files {files} and those of the "
                       "image they build on are not a closed set", ignore=() if strict else ("openpert ",))
    else:
        _run([interpreter, "-m", "venv", *(["--without-pip"] if _host_pip() else []), str(path)], build_log,
             f"{path}: creating the virtual environment")
        write_text_atomic(path / PINS_FILE, "".join(f"{pin}\n" for pin in pins))
        files = ", ".join(sorted({str(pin.source) for pin in pins}))
        _run([*pip, "--no-deps", "--requirement", str(path / PINS_FILE)], build_log,
             f"{path}: installing the pins of {files}", _pip_env())
        _run([*_pip(env_python), "check"], build_log,
             f"{path}: pip check: the requirement files {files} are not a closed set", _pip_env())
        # Editable: the environment follows the work tree, as an image built from it would hold it.
        # One install at a time per checkout, whatever the cache: the build writes the package's
        # metadata (common/openpert.egg-info) into the checkout.
        checkout = hashlib.sha256(str(source).encode()).hexdigest()[:12]
        with locked(Path(tempfile.gettempdir()) / f"openpert-harness-install-{checkout}.lock"):
            _run([*pip, "--no-deps", "--editable", str(source)], build_log, f"{path}: installing the harness from {source}",
                 _pip_env())
        if strict:
            _run([*_pip(env_python), "check"], build_log,
                 f"{path}: pip check: the harness's dependencies ({source / 'pyproject.toml'}) are not all in {files}",
                 _pip_env())
    if extras:
        # As the component's Dockerfile installs them: with their dependencies, on top of the image.
        _run([*pip, *(["--upgrade"] if upgrade else []), *extras], build_log, f"{path}: installing {' '.join(extras)}",
             _pip_env())
        # Not strict: the stand-in image lacks the harness's dependencies; judge what the extras need.
        _pip_check(env_python, build_log, f"{path}: pip check after installing {' '.join(extras)}",
                   ignore=() if strict else ("openpert ",))
    # What is already compiled (the files of a base environment) is left as it is.
    _run(bytecode_command(env_python, path), build_log, f"{path}: compiling its modules to bytecode")
    copied_files, copied_bytes = _still_linked(path, linked)
    finished = [other for other in _env_folders(cache) if (other / STAMP).is_file() and other != path]
    shared = share_identical_files(path, finished)
    shared_files, shared_bytes = shared.files + copied_files, shared.bytes + copied_bytes
    log(f"{path.name}: {shared_files} files ({shared_bytes / 1e9:.2f} GB) shared with the finished environments of {cache}"
        + (f"; stopped, the file system refused a hard link: {shared.refused}" if shared.refused else ""))
    seconds = time.monotonic() - started
    stamp = {"key": key, **stamp, "interpreter": interpreter, "harness": str(source), "packages": len(pins),
             "shared_files": shared_files, "shared_bytes": shared_bytes,
             "extras": extras, "build_seconds": round(seconds, 1), "built": time.strftime("%Y-%m-%dT%H:%M:%S")}
    write_text_atomic(path / STAMP, json.dumps(stamp, indent=2) + "\n")
    build_log.unlink(missing_ok=True)
    log(f"built {path.name} in {seconds:.0f} s")
    return seconds


def base_env(root: str | Path, base: str, cache_dir: str | Path | None = None, python: str | Path | None = None,
             log: Log = log_to_stderr, rebuild: bool = False, strict: bool = True, packages: Sequence[str] = (),
             upgrade: bool = True) -> ImageEnv:
    """The environment of base image ``base`` (and ``packages``), built unless a finished one with the same key is cached.

    With ``packages``, an overlay: a complete virtual environment of its own (a copy of the base's
    environment, built first, then ``packages`` installed by pip with their dependencies, as a
    component's Dockerfile installs them), not a view onto the base environment: the job sandbox
    shows a job its interpreter's environment alone, so an environment that reached into another
    folder would lose it there.

    Parameters
    ----------
    root
        The project (its ``docker/`` folder holds the base images).
    base
        The base image's name.
    cache_dir
        Where environments are kept (default :func:`default_cache_dir`).
    python
        The interpreter to build with (default ``$OPENPERT_IMAGE_PYTHON`` or this one); its
        major.minor must be the image's.
    log
        Receives one line per build.
    rebuild
        Build again even when a cached environment matches.
    strict
        Require the image to hold every dependency of the harness (``pip check`` after installing
        it), as the project's images do; a stand-in image of a test may not.
    packages, upgrade
        Python packages added on top of the image, and whether pip upgrades what they need.

    Raises
    ------
    ImageError
        When the requirement files conflict, the interpreter's version differs from the image's, or a
        build step fails (with the end of its log); a failing ``pip check`` names the files that are
        not a closed set.
    """
    root = Path(root).resolve()
    pins = merge_pins(base_env_files(root, base))
    interpreter = _interpreter(python)
    chain = base_chain(root, base)
    parent = chain[-2].name if len(chain) > 1 else None
    version = _check_interpreter(interpreter, python_version(root, base), chain[0].dockerfile)
    base_key = base_env_key(root, base, interpreter)
    cache = Path(cache_dir).resolve() if cache_dir else default_cache_dir(root)
    packages = tuple(packages)
    if packages:
        key = hashlib.sha256(json.dumps([base_key, list(packages), upgrade, strict]).encode()).hexdigest()
        folder, what, stamp = cache / "overlays", f"image {base} + {' '.join(packages)}", {"base_key": base_key}
    else:
        key = hashlib.sha256(f"{base_key} strict={strict}".encode()).hexdigest()
        folder, what = cache, f"image {base}: {len(pins)} pinned packages"
        stamp = {"files": [str(f.path) for f in base_env_files(root, base)]}
    path = folder / f"{base}-{key[:16]}"
    with locked(folder / f".{path.name}.lock"):
        if not rebuild and _read_stamp(path, key):
            return ImageEnv(path=path, base=base, key=key, packages=packages)
        # An overlay starts as a copy of its base image's environment, and a base image's environment
        # as a copy of its FROM image's (each built now unless cached): the copy holds the harness
        # and the pins of the images below, so only what this one adds is installed.
        under, added = None, []
        if packages:
            under = base_env(root, base, cache_dir=cache, python=interpreter, log=log, strict=strict).path
        elif parent is not None:
            under = base_env(root, parent, cache_dir=cache, python=interpreter, log=log, strict=strict).path
            below = {pin.key for pin in merge_pins(base_env_files(root, parent))}
            added = [pin for pin in pins if pin.key not in below]
        seconds = _build(path, key, interpreter, pins, list(packages), upgrade, strict, what, log,
                         {"base": base, "python": version, **stamp}, cache, base=under, added=added)
        return ImageEnv(path=path, base=base, key=key, packages=packages, built_seconds=seconds)


def component_env_request(config: ComponentConfig) -> tuple[str, tuple[str, ...], bool]:
    """What a component's environment is made of, without making it: base image, added packages, ``upgrade``.

    Components with the same request share one environment (:func:`component_env`).

    Raises
    ------
    ImageError
        When the component does not name a base image of the project, or its setup has apt packages
        or docker lines, which a virtual environment cannot reproduce (test it in its image).
    """
    declaration = image_declaration(config)
    if declaration.base is None:
        raise ImageError(f"{config.path}: engines: image {declaration.image} is not a base image of docker/; "
                         "no environment reproduces it")
    if declaration.apt_packages or declaration.docker_lines:
        raise ImageError(f"{config.path}: engines: setup with apt packages or docker lines cannot be reproduced in a "
                         "virtual environment; test this component in its image (docker build)")
    upgrade = all(entry.get("upgrade", True) for entry in declaration.setup if entry.get("type") == "python")
    return declaration.base.name, tuple(declaration.python_packages), upgrade


def component_env(config: ComponentConfig, cache_dir: str | Path | None = None, python: str | Path | None = None,
                  log: Log = log_to_stderr, rebuild: bool = False, strict: bool = True) -> ImageEnv:
    """The environment a component's test runs in: its base image's, with an overlay if it adds packages.

    ``strict`` is :func:`base_env`'s.

    Raises
    ------
    ImageError
        As :func:`component_env_request`.
    """
    base, packages, upgrade = component_env_request(config)
    return base_env(config.root, base, cache_dir=cache_dir, python=python, log=log, rebuild=rebuild,
                    strict=strict, packages=packages, upgrade=upgrade)


def prune_envs(root: str | Path, cache_dir: str | Path | None = None, python: str | Path | None = None,
               log: Log = log_to_stderr) -> list[Path]:
    """Remove the cached environments that no longer match the project's requirement files.

    A base environment stays when its folder is the one :func:`base_env` would use now (strict or
    not); an overlay stays when it was built on a current base. Unfinished builds go too.

    Returns
    -------
    The folders removed.
    """
    from openpert.images.bases import base_images

    root = Path(root).resolve()
    cache = Path(cache_dir).resolve() if cache_dir else default_cache_dir(root)
    if not cache.is_dir():
        return []
    interpreter = _interpreter(python)
    current = {name: base_env_key(root, name, interpreter) for name in base_images(root)}
    keep = {f"{name}-{hashlib.sha256(f'{key} strict={strict}'.encode()).hexdigest()[:16]}"
            for name, key in current.items() for strict in (True, False)}
    removed: list[Path] = []
    for folder in _env_folders(cache):
        try:
            stamp = json.loads((folder / STAMP).read_text())
        except (OSError, json.JSONDecodeError):
            stamp = {}  # unfinished or damaged: nothing uses it
        if folder.parent == cache and folder.name in keep and stamp:
            continue
        if folder.parent.name == "overlays" and stamp and stamp.get("base_key") == current.get(stamp.get("base", "")):
            continue
        with locked(folder.parent / f".{folder.name}.lock"):
            shutil.rmtree(folder)
        (folder.parent / f".{folder.name}.lock").unlink(missing_ok=True)
        (folder.parent / f"{folder.name}.build.log").unlink(missing_ok=True)
        log(f"removed {folder}")
        removed.append(folder)
    return removed
