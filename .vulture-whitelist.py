# Names vulture cannot see used (run by .ci/run: `vulture forge tests bench .vulture-whitelist.py`).
# Each line says who uses the name.
# ruff: noqa
from forge.cli import forget, kit, views, work
from forge.run.state.run_state import TaskState

work.resume  # a typer command: registered by its decorator
forget.forget  # a typer command
views.hooks_install  # a typer command
views.hooks_uninstall  # a typer command
views.demo  # a typer command
kit.app.registered_groups  # read by typer when it builds the app (forge.cli._app_for)
kit._Commands.format_commands  # click calls it when it writes the top-level help
TaskState.merged_commit  # written to state.json for people and tests
subreaper  # pytest fixtures used by name or autouse
hermetic
bytecode
unboxed
no_background_left
quick_backoff
default_mode
from forge.commands.doctor import Facts

Facts.limits  # a key of `forge doctor --json`, read by its render
from bench.model_server import Handler  # http.server calls these by name

Handler.protocol_version
Handler.log_message
Handler.do_GET
Handler.do_HEAD
Handler.do_POST
from forge.base.text import PrintableStream

PrintableStream.writable  # the io protocol

import typer.core

typer.core.HAS_RICH  # set by forge/cli/kit.py: typer must not escape option help for rich
cli._main  # the typer callback that answers --version
from tests.commands.test_report import Page

Page.handle_starttag  # html.parser calls these by name
Page.handle_data
pytestmark  # tests/run/contain/test_sandbox_root.py: pytest reads it
from forge.commands.candidate_view import CandidateRow
from forge.commands.doctor import Facts
from forge.commands.stats import SpecStats

# TypedDict keys: read by key in the text, written whole as --json
Facts.capabilities
Facts.capabilities_kept
Facts.namespaces
Facts.dropped_variables
Facts.cgroup
SpecStats.land_rate
SpecStats.cost_applies
SpecStats.unpriced_attempts
SpecStats.cost_per_landed_usd
SpecStats.median_seconds_to_land
SpecStats.model_mismatches
CandidateRow.cost_known
DataclassInstance  # forge/frozen.py: the type its cast names (in a string)
_assigns_a_field  # tests/test_frozen.py: read by mypy, never called
from forge.serve.server import _Handler, _Server  # http.server reads these by name

_Server.daemon_threads
_Server.address_family
_Handler.close_connection
from tests.helpers.github import _Handler as GitHubHandler  # http.server calls these by name

GitHubHandler.do_PATCH
GitHubHandler.do_PUT
from forge.host.api import PrState

PrState.OPEN  # a state the host answers with (read by value)
from forge.commands.tests import KnownTest

KnownTest.flaky_on  # a TypedDict key, written whole as --json
# forge's pytest plugin: pytest calls its hooks by name
from forge.verify.pytest_plugin import forge_lane_report

forge_lane_report.pytest_collection_modifyitems
forge_lane_report.pytest_testnodedown
forge_lane_report.pytest_runtest_logreport
forge_lane_report.pytest_collectreport
forge_lane_report.pytest_sessionfinish
