"""One click command per module, each a thin shell over a rule module; the
conventions they share live here, so every command behaves the same way:

- one error format, `cozyrender <command>: error: <message>` on stderr, exit 2
  for bad input (`CommandError`, `fail`), with no Python wording (`errno`
  texts become `no such file`, `permission denied`, ...); warnings the same
  way with `warning:` (`warn`), never doubled;
- `-` for standard input wherever a file is taken (`read_text`, `read_bytes`),
  read once per process;
- folders wherever files are taken (`expand_paths`: the YAML/JSON files below,
  suffixes in any letter case, in name order, dotfiles and dot-folders
  skipped, every skipped file named in a warning with why);
- what a state command read, one line on stderr (`say_what_was_read`: files,
  objects by kind), and a state without the kinds an answer needs is bad
  input (`require_kinds`), never a green answer over nothing; a state that
  cannot be read or indexed is one line in our words (`state_errors`);
- one `-o/--output` vocabulary (`output_option`, `emit`): `table` (default,
  for people), `wide` (the same table with more columns), `json`, `yaml`;
  tables through one formatter (`cozyrender.columns`);
- Helm's values flags (`values_options`, `user_values`): `-f/--values` (`-`
  too), `--set`, `--set-string`, `--set-json`, `--set-file`, each file read
  once per run however many releases take the values;
- an example in every `--help` (`examples`).

Each convention is a module here (`messages`, `inputs`, `states`, `output`, `values`); the
names the commands use are re-exported from the package.
"""

from .inputs import (EMPTY_FOLDER, STATE_SUFFIXES, STDIN, STDIN_NAME, expand_paths, read_bytes, read_kubeconfig,
                     read_text, source_name)
from .messages import EXIT_BAD_INPUT, CommandError, command_name, fail, format_error, os_problem, shown, warn
from .output import OUTPUTS, emit, examples, output_option, plural
from .states import (cluster_options, kinds_read, live_state, load_state, require_budget_state, require_kinds,
                     say_what_was_read, state_errors, state_options, what_was_read)
from .values import parent_values, user_values, values_options, values_warnings

__all__ = ["CommandError", "EMPTY_FOLDER", "EXIT_BAD_INPUT", "OUTPUTS", "STATE_SUFFIXES", "STDIN", "STDIN_NAME",
           "cluster_options", "command_name", "emit", "examples", "expand_paths", "fail", "format_error", "kinds_read",
           "live_state", "load_state", "os_problem", "output_option", "parent_values", "plural", "read_bytes",
           "read_kubeconfig", "read_text", "require_budget_state", "require_kinds", "say_what_was_read", "shown",
           "source_name", "state_errors", "state_options", "user_values", "values_options", "values_warnings",
           "warn", "what_was_read"]
