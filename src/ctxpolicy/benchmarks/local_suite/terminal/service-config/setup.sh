#!/bin/bash
set -e
cat > template.conf <<'CONF'
[service]
name = {{NAME}}
listen = 0.0.0.0:{{PORT}}
workers = {{WORKERS}}
log_prefix = {{NAME}}-
CONF
cat > defaults.env <<'ENV'
NAME=ledger-api
PORT=8080
WORKERS=2
ENV
printf 'alpha.internal\nbeta.internal\n\ngamma.internal\ndelta.internal\n\n' > hosts.txt
cat > README.txt <<'TXT'
template.conf uses {{KEY}} placeholders.
defaults.env holds KEY=VALUE defaults for a development setup.
hosts.txt lists one backend host per line; blank lines are ignored.
TXT
