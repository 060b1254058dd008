#!/usr/bin/env bash
# manpage.sh KREPLAY VERSION: kreplay(1) from the CLI's own --help texts (the top level, each
# command and each of their subcommands), so the page never drifts from the flags.
set -euo pipefail
kreplay=$1 version=$2

# roff: backslashes escaped, a leading . or ' not taken for a request
roff() { sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"; }
# the names under "Commands:" of a help text (not "help")
commands() { sed -n '/^Commands:/,/^$/p' | sed -n 's/^  \([a-z][a-z-]*\).*/\1/p' | grep -vx help || true; }

cat <<HEAD
.TH KREPLAY 1 "" "kreplay $version" "User Commands"
.SH NAME
kreplay \- kernel tracing agent and query-and-replay daemon
.SH SYNOPSIS
.B kreplay
.I command
.RI [ options ]
.SH DESCRIPTION
The sections below are the output of
.B kreplay \-\-help
and of each command's
.BR \-\-help .
The documentation under /usr/lib/kreplay/docs (install, operate, query, replay, internals, reference) explains every contract in full.
The units kreplay\-agent.service and kreplay\-daemon.service read their
extra flags from /etc/kreplay/agent.env and /etc/kreplay/daemon.env.
HEAD

section() {
  printf '.SS "%s"\n.nf\n' "$*"
  "$kreplay" "$@" --help | roff
  printf '.fi\n'
}

printf '.SH COMMANDS\n'
section
for command in $("$kreplay" --help | commands); do
  section "$command"
  for sub in $("$kreplay" "$command" --help | commands); do section "$command" "$sub"; done
done
cat <<TAIL
.SH FILES
.TP
/etc/kreplay/agent.yaml
the agent's service rules (\-\-config)
.TP
/var/lib/kreplay
the node stores and, in .replay, the daemon's replay sessions
.SH SEE ALSO
.BR systemctl (1),
.BR journalctl (1)
TAIL
