#!/usr/bin/env python3
"""Start JupyterLab on a Unix socket, with the token read from a file.

Contract:
  $EINSORA_TOKEN_FILE (default $EINSORA_RUN_DIR/token): read at start, first line,
    stripped; required. Einsora mounts it read-only from outside any directory the
    workload can write, so nothing in the notebook can replace it.
  $EINSORA_RUN_DIR (default /run/einsora), mounted 0700 and owned by the server's user:
    jl.sock  the server's socket (mode 0600); no TCP port is opened
  $EINSORA_NOTEBOOK_DIR (default /work): the server's root dir
  any arguments are passed on to `jupyter lab`

The token is handed to the server as in-process configuration, so it appears in no
environment variable, no argv (/proc/*/cmdline) and not in `docker inspect`.
"""
import os
import sys

from jupyterlab.labapp import LabApp
from traitlets.config import Config


def main():
    run_dir = os.environ.get("EINSORA_RUN_DIR") or "/run/einsora"
    root_dir = os.environ.get("EINSORA_NOTEBOOK_DIR") or "/work"
    token_file = os.environ.get("EINSORA_TOKEN_FILE") or os.path.join(run_dir, "token")
    try:
        with open(token_file, encoding="utf-8") as f:
            token = f.readline().strip()
    except OSError as e:
        sys.exit(f"start.py: cannot read the token: {e}")
    if not token:
        sys.exit(f"start.py: empty token in {token_file}")
    os.environ.pop("JUPYTER_TOKEN", None)  # the file is the only source

    c = Config()
    c.IdentityProvider.token = token
    # Offline image: no announcements, update checks or PyPI extension manager.
    c.LabApp.news_url = None
    c.LabApp.check_for_updates_class = "jupyterlab.handlers.announcements.NeverCheckForUpdate"
    c.LabApp.extension_manager = "readonly"

    argv = [
        "--no-browser",
        f"--sock={run_dir}/jl.sock",
        "--ServerApp.sock_mode=0600",
        "--KernelManager.transport=ipc",
        "--ServerApp.allow_remote_access=True",  # a proxy's Host header; the token still guards
        f"--ServerApp.root_dir={root_dir}",
        *sys.argv[1:],
    ]
    # What LabApp.launch_instance does, but with our Config given to the ServerApp.
    server = LabApp.initialize_server(argv=argv, config=c)
    server.start()


if __name__ == "__main__":
    main()
