"""`kohaku serve`: the ask page, the JSON API and the OpenAI-compatible endpoint over the lake."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import uvicorn

from kohaku_assets.cli.commands import SettingsOf, Subcommands
from kohaku_assets.resources import KohakuSettings
from kohaku_assets.runner import PROCESS_MODELS
from kohaku_rag.answering.config_folder import config_files, configs_dir
from kohaku_rag.http_retry import check_api_key_env
from kohaku_rag.serving.app import build_app
from kohaku_rag.serving.limits import proxy_networks
from kohaku_rag.serving.settings import ServeSettings, check_exposure


def serve_settings(args: argparse.Namespace, settings: KohakuSettings) -> tuple[ServeSettings, str | None]:
    """The server's settings and the warning to print (ValueError when refused)."""
    key = None
    if args.api_key_env:
        check_api_key_env(args.api_key_env)
        key = os.environ.get(args.api_key_env, "")
        if not key:
            raise ValueError(f"--api-key-env {args.api_key_env}: the variable is not set or empty")
    warning = check_exposure(args.host, key, args.no_auth)
    settings.index_config()  # a different --index-config is refused, as everywhere
    if args.config and args.config != "default" and args.config not in config_files(configs_dir(settings.lake)):
        raise ValueError(f"--config {args.config}: no {args.config}.toml or .json in {configs_dir(settings.lake)}")
    for flag in ("feedback_per_minute", "feedback_per_answer"):
        if getattr(args, flag, 1) < 1:
            raise ValueError(f"--{flag.replace('_', '-')}: give a whole number of at least 1")
    lease = getattr(args, "job_lease", ServeSettings.job_lease)
    if not 1 <= lease <= 3600:
        raise ValueError("--job-lease: give seconds from 1 to 3600")
    proxies = tuple(getattr(args, "trusted_proxy", None) or ())
    proxy_networks(proxies)  # a value that is no address is refused before the server starts
    served = ServeSettings(
        lake=Path(settings.lake.root),
        config=args.config,
        api_key=key,
        cors_origin=args.cors or None,
        feedback_per_minute=getattr(args, "feedback_per_minute", ServeSettings.feedback_per_minute),
        feedback_per_answer=getattr(args, "feedback_per_answer", ServeSettings.feedback_per_answer),
        trusted_proxies=proxies,
        job_lease=lease,
    )
    return served, warning


def cmd_serve(args: argparse.Namespace, settings: KohakuSettings) -> int:
    served, warning = serve_settings(args, settings)
    if warning:
        print(warning, file=sys.stderr)
    app = build_app(served, PROCESS_MODELS)
    print(f"kohaku serve: http://{args.host}:{args.port}/ for the lake {served.lake} (Ctrl-C stops)")
    # uvicorn's own proxy headers are off: by default it believes X-Forwarded-For from
    # loopback, which let any local client pick its rate budget; the app reads the header
    # itself, only from --trusted-proxy peers
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", access_log=False, proxy_headers=False)
    return 0


def add_parser(sub: Subcommands, common: argparse.ArgumentParser, settings_of: SettingsOf) -> None:
    p = sub.add_parser(
        "serve", parents=[common], help="serve the ask page, a JSON API and an OpenAI-compatible endpoint"
    )
    p.add_argument("--config", default=None, help="the config a request without one gets (default: 'default')")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s, this machine only)")
    p.add_argument("--port", type=int, default=8008, help="port (default: %(default)s)")
    p.add_argument(
        "--api-key-env",
        default=None,
        metavar="VAR",
        help="environment variable holding the key clients send as 'Authorization: Bearer <key>'",
    )
    p.add_argument(
        "--no-auth", action="store_true", help="allow a non-loopback --host without a key (prints a warning)"
    )
    p.add_argument("--cors", default=None, metavar="ORIGIN", help="allow cross-origin calls from this one origin")
    p.add_argument(
        "--feedback-per-minute",
        type=int,
        default=ServeSettings.feedback_per_minute,
        metavar="N",
        help="feedback posts one client address may send a minute, per process (default: %(default)s)",
    )
    p.add_argument(
        "--feedback-per-answer",
        type=int,
        default=ServeSettings.feedback_per_answer,
        metavar="N",
        help="verdicts kept on one answer, over every process on the lake (default: %(default)s)",
    )
    p.add_argument(
        "--trusted-proxy",
        action="append",
        default=None,
        metavar="ADDRESS",
        help="a reverse proxy (IP address or network; repeat for more) whose X-Forwarded-For names the client "
        "for the feedback rate; from any other peer the header is ignored (default: none)",
    )
    p.add_argument(
        "--job-lease",
        type=float,
        default=ServeSettings.job_lease,
        metavar="SECONDS",
        help="how long a process's hold on the answers it is working on lasts unless renewed: when a process "
        "dies, another on the lake takes its answers over (or fails them with the reason) within about "
        "1.25 times this (default: %(default)s)",
    )
    p.set_defaults(func=lambda args: cmd_serve(args, settings_of(args)))
