"""What each `kohaku` subcommand module hands the CLI: `add_parser(sub, common, settings_of)`
adds its parser under `sub`, with the options every command shares (`common`), and binds
its handler to the settings `settings_of` reads from the parsed arguments."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from kohaku_assets.resources import KohakuSettings

__all__ = ["SettingsOf", "Subcommands"]

Subcommands = argparse._SubParsersAction  # argparse's type of `add_subparsers()`, public in use
SettingsOf = Callable[[argparse.Namespace], KohakuSettings]
