"""Start JupyterLab for a lecture: `make lab`, or on any OS `python slides/lab.py`.

    python slides/lab.py [--dir build/lab] [--port 8888] [--no-browser] [--prepare-only]

What it does, and why:

* It serves a working copy of the decks, build/lab/notebooks/ (and img/ beside
  it), never notebooks/ itself. Running a deck, presenting it and saving it
  change only the copy, so a lecture never rewrites the stored outputs that
  `make test` checks, and `git status` stays clean (build/ is ignored).
  A deck is copied again only when the repository's version changed since the
  last copy; the copy it replaces is kept as build/lab/previous/<deck>.
* It prints the full URL, token included. JupyterLab masks a token given on its
  command line ("?token=..."), which leaves a machine without a browser of its
  own (WSL, SSH, a lecture-hall PC) unable to log in. The token is new and
  random on every start and goes to the server through JUPYTER_TOKEN, so it
  does not show in the process list.
* The live presenter is jupyterlab-slideshow: `deck:start` presents the notebook
  view itself, so ipywidgets controls work while presenting. Its settings (and
  the course stylesheet, slides/course.css) are passed to this server only, in
  build/lab/, not written into the user's own Jupyter settings.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
COURSE_CSS = HERE / "course.css"

# Keys a teacher expects, in the presenter: space / → forward through every
# fragment, subslide and slide; shift+space / ← back. (The presenter's own →
# skips subslides, where the controls are.) The selector is the presenter's
# own: a focused element inside a presented notebook in command mode.
_DECK_FOCUS = ".jp-Deck .jp-Notebook.jp-mod-commandMode:not(.jp-mod-readWrite) :focus"
_FORWARD = {"direction": "down", "alternate": "forward"}
_BACK = {"direction": "up", "alternate": "back"}
SHORTCUTS = [
    {"command": "deck:go", "keys": ["ArrowRight"], "selector": _DECK_FOCUS, "args": _FORWARD},
    {"command": "deck:go", "keys": ["PageDown"], "selector": _DECK_FOCUS, "args": _FORWARD},
    {"command": "deck:go", "keys": ["ArrowLeft"], "selector": _DECK_FOCUS, "args": _BACK},
    {"command": "deck:go", "keys": ["PageUp"], "selector": _DECK_FOCUS, "args": _BACK},
]

# JupyterLab defaults for this server only (overrides.json in its app settings).
OVERRIDES = {
    "@jupyterlab/shortcuts-extension:shortcuts": {"shortcuts": SHORTCUTS},
    # No pop-ups in front of the class, and no requests to the internet.
    "@jupyterlab/apputils-extension:notification": {"checkForUpdates": False, "fetchNews": "false"},
    # Start outside presentation mode, whatever the last lecture left.
    "jupyterlab-slideshow:plugin": {"active": False},
    # Render every cell up front. JupyterLab's default "contentVisibility" mode
    # renders off-screen cells late, and when a presented notebook's cells
    # change it throws (its visibility observer is already gone).
    "@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"},
}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def prepare(workdir: Path, notebooks: Path = ROOT / "notebooks", images: Path = ROOT / "img") -> Path:
    """Make or refresh the working copy in `workdir`; return its app-settings folder."""
    workdir.mkdir(parents=True, exist_ok=True)
    manifest_path = workdir / "sources.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8")) if manifest_path.exists() else {}
    for folder, name, pattern in ((notebooks, "notebooks", "*.ipynb"), (images, "img", "*.png"),
                                  (notebooks / "quizzes", "notebooks/quizzes", "*.json")):
        target_dir = workdir / name
        target_dir.mkdir(parents=True, exist_ok=True)
        for source in sorted(folder.glob(pattern)):
            target, key = target_dir / source.name, f"{name}/{source.name}"
            digest = _digest(source)
            if target.exists() and manifest.get(key) == digest:
                continue  # unchanged in the repository: keep the copy and whatever was saved in it
            if target.exists() and _digest(target) != digest:
                previous = workdir / "previous" / name
                previous.mkdir(parents=True, exist_ok=True)
                shutil.copy2(target, previous / source.name)
            shutil.copy2(source, target)
            manifest[key] = digest
    manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")

    settings = workdir / "app-settings"
    settings.mkdir(exist_ok=True)
    (settings / "overrides.json").write_text(json.dumps(OVERRIDES, indent=2), encoding="utf-8")
    custom = workdir / "config" / "custom"
    custom.mkdir(parents=True, exist_ok=True)
    shutil.copy2(COURSE_CSS, custom / "custom.css")
    return settings


def free_port(preferred: int) -> int:
    """`preferred` or one of the next 49 ports if free, else any free port (0: any)."""
    for port in (list(range(preferred, preferred + 50)) if preferred else []) + [0]:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise RuntimeError("no free port on 127.0.0.1")


def command(workdir: Path, port: int, settings: Path, extra: list[str]) -> list[str]:
    cmd = [sys.executable, "-m", "jupyterlab",
           "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
           f"--ServerApp.root_dir={workdir}", "--ServerApp.default_url=/lab/tree/notebooks",
           f"--LabApp.app_settings_dir={settings}",
           f"--LabApp.user_settings_dir={workdir / 'user-settings'}",
           f"--LabApp.workspaces_dir={workdir / 'workspaces'}",
           "--LabApp.custom_css=True"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # containers and lecture-hall VMs often run as root
    return cmd + extra


def environment(workdir: Path, token: str) -> dict:
    # JUPYTER_CONFIG_DIR holds custom/custom.css (the course stylesheet) for this server.
    return dict(os.environ, JUPYTER_TOKEN=token, JUPYTER_CONFIG_DIR=str(workdir / "config"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=str(ROOT / "build" / "lab"), help="working copy of the decks")
    ap.add_argument("--port", type=int, default=8888, help="first port to try")
    ap.add_argument("--prepare-only", action="store_true", help="refresh the working copy and stop")
    args, extra = ap.parse_known_args(argv)

    workdir = Path(args.dir).resolve()
    settings = prepare(workdir)
    if args.prepare_only:
        print(workdir)
        return 0
    port, token = free_port(args.port), secrets.token_hex(24)
    url = f"http://127.0.0.1:{port}/lab/tree/notebooks?token={token}"
    print("\n  课程幻灯片 / Course decks (a working copy; the repository is never written):")
    print(f"    {workdir / 'notebooks'}")
    print("  在浏览器中打开 / Open in a browser:")
    print(f"    {url}\n", flush=True)
    cmd, env = command(workdir, port, settings, extra), environment(workdir, token)
    if os.name == "posix":
        os.execve(sys.executable, cmd, env)  # become the server: Ctrl+C and kill reach it directly
    proc = subprocess.Popen(cmd, env=env)  # Windows has no exec that keeps the console
    try:
        return proc.wait()
    except KeyboardInterrupt:  # Ctrl+C: let JupyterLab shut down its kernels
        return proc.wait()


if __name__ == "__main__":
    sys.exit(main())
